"""Human approval (§20, docs/approvals.md) outside the engine's step kind (runtime/engine/approvals.py): a person's
decision (decisions.py), the one-click links signed by the server's key (links.py) and the messages a request, its
reminders and its escalation send to the step's channel (notices.py)."""
