"""Application functions (publish, run, wait, runs, logs, follow) shared by the CLI and the REST API.

`anthares44.automation.api` re-exports the public names; import from there.
"""

from .ingestion import Ingestion  # noqa: E402,F401 - the ingestion verbs (events, webhooks, tokens)
from .queues import Queues  # noqa: E402,F401 - queues and the dead-letter queue (§10)
from .remote import RemoteAutomation  # noqa: E402,F401 - the same verbs over a daemon's REST API (docs/cli.md)
from .replay import replay  # noqa: E402,F401 - replay from a step or an instant (§13)
