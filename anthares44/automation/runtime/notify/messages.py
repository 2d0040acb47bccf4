"""What each kind of receiver gets for one notification: the signed webhook's JSON document, the Slack-compatible
`{"text", "blocks"}` summary and the email's subject and text (docs/notifications.md "Payloads").

The alert's payload (docs/alerts.md "Messages") is passed through whole in the webhook document; the readable
summaries read these keys of it (each optional): `title`, `workflow`, `run_id`, `failed_step`, `partition_key`,
`queue`, `dlq_depth`, `error_code`, `error_message`, `attempts`, `count`, `next_action`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...jsonenc import iso

SUMMARY_FIELDS = (("workflow", "Workflow"), ("run_id", "Run"), ("failed_step", "Step"), ("partition_key", "Partition"),
                  ("queue", "Queue"), ("dlq_depth", "DLQ depth"), ("attempts", "Attempts"), ("count", "Occurrences"))
MAX_TEXT = 2900       # a Slack section's text is limited to 3000 characters


@dataclass(frozen=True)
class Notification:
    """One claimed row of automation.notifications."""
    id: int
    project: str
    channel: str
    idempotency_key: str
    alert_id: str | None
    kind: str
    severity: str
    payload: dict
    attempt: int
    created_at: datetime

    @classmethod
    def of(cls, row) -> Notification:
        payload = row["payload"] if isinstance(row["payload"], dict) else {"value": row["payload"]}
        return cls(row["id"], row["project_id"], row["channel"], row["idempotency_key"], row["alert_id"], row["kind"],
                   row["severity"], payload, row["attempts"], row["created_at"])


def document(n: Notification) -> dict:
    """The generic webhook's JSON body."""
    return {"type": "a44.notification", "id": n.id, "idempotency_key": n.idempotency_key, "project": n.project,
            "channel": n.channel, "alert_id": n.alert_id, "kind": n.kind, "severity": n.severity,
            "created_at": iso(n.created_at), "payload": n.payload}


def headline(n: Notification) -> str:
    """The alert's own title (it says severity, kind and what: `[P2] firing: wf_x run failed: ...`), else one made
    from the workflow and error code."""
    p = n.payload
    if p.get("title"):
        return str(p["title"])
    what = " ".join(str(x) for x in (p.get("workflow"), p.get("error_code")) if x) or \
        ("channel test" if n.kind == "test" else "alert")
    return f"[{n.severity.upper()}] {n.kind}: {what}"


def _error(n: Notification) -> str | None:
    code, message = n.payload.get("error_code"), n.payload.get("error_message")
    if not code and not message:
        return None
    return " ".join(str(x) for x in (code, message) if x)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…"


def slack_body(n: Notification) -> dict:
    """`text` (the notification line and the fallback of clients without blocks) and the blocks of the summary."""
    p = n.payload
    title = headline(n)
    fields = [{"type": "mrkdwn", "text": _clip(f"*{label}*\n{p[key]}")}
              for key, label in SUMMARY_FIELDS if p.get(key) not in (None, "")]
    fields.insert(0, {"type": "mrkdwn", "text": f"*Severity*\n{n.severity.upper()}"})
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:150]}},
        {"type": "section", "fields": fields[:10]},
    ]
    error = _error(n)
    if error:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _clip(f"*Error*\n{error}")}})
    if p.get("next_action"):
        blocks.append({"type": "section", "text": {"type": "mrkdwn",
                                                   "text": _clip(f"*Next*\n```{p['next_action']}```")}})
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"a44 · {n.project} · "
                                                                              f"{n.idempotency_key}"}]})
    text = title + (f" — {error}" if error else "")
    return {"text": _clip(text), "blocks": blocks}


def email_text(n: Notification) -> tuple[str, str]:
    """(subject, plain-text body)."""
    p = n.payload
    lines = [headline(n), "", f"Severity: {n.severity.upper()}"]
    lines += [f"{label}: {p[key]}" for key, label in SUMMARY_FIELDS if p.get(key) not in (None, "")]
    error = _error(n)
    if error:
        lines.append(f"Error: {error}")
    if p.get("next_action"):
        lines += ["", "Next:", f"    {p['next_action']}"]
    lines += ["", f"-- a44 · project {n.project} · notification {n.id} · key {n.idempotency_key}"]
    return headline(n).replace("\n", " ")[:200], "\n".join(lines) + "\n"


def message_id(idempotency_key: str, sender: str) -> str:
    """The email Message-ID: the same for every send of one notification, so a repeat is recognisable."""
    domain = sender.rsplit("@", 1)[-1] or "a44.invalid"
    return f"<a44.{hashlib.sha256(idempotency_key.encode()).hexdigest()[:40]}@{domain}>"
