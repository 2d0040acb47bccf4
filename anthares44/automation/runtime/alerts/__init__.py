"""Alerts (docs/alerts.md): rules evaluated on sampled system metrics, the built-in alerts on run outcomes and DLQ
growth, the suppression state machine, and the evaluator one daemon at a time runs. Delivery of the notifications
they enqueue is not here: it reads automation.notifications."""
