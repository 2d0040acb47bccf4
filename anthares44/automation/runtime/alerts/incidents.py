"""Alerts grouped into one incident per cause (docs/alerts.md "Incidents"): one failure that several rules match
(a run fails, its message is dead-lettered, a rule watches that DLQ) reaches a person as one message naming every
rule it matched, not one message per rule.

The grouping key is (project, channel, cause); a cause is `run:RUN` (a run outcome, a dead-lettered run) or
`dead_letter:ID` (an envelope that never became a run), listed in an alert's context as `causes` (causes.py).
Only `firing` messages are grouped: a rule's updates, escalation and resolution keep their own cadence
(suppression.py). When an alert opens and every one of its causes has an open incident on the channel (one of
the incident's alerts still fires), it sends nothing of its own: its rule is added to the incident's message
while that message waits unsent, else recorded on the incident only (`a44 monitor alerts` shows it). Otherwise its
message goes out and opens the incident of each cause. It all runs in the transaction of the alert's state change
(ledger.py), so a crash decides it again from the same rows.
"""

from __future__ import annotations

import json
from datetime import datetime

from ...jsonenc import to_json


def matched(rule: str, aid: str, payload: dict) -> dict:
    """How a message names one rule it matched."""
    return {"rule": rule, "alert_id": aid, "title": payload["title"], "next_action": payload.get("next_action")}


async def send_firing(tx, project: str, rule: str, aid: str, channel: str, key: str, severity: str, payload: dict,
                      now: datetime) -> bool:
    """Enqueue the firing message of alert `aid` on `channel` unless every cause already has an open incident
    there (then join them). True when a message was enqueued."""
    causes = payload["causes"]
    open_ = {c: await tx.fetchrow("alert_incident_open", project=project, channel=channel, cause=c) for c in causes}
    if all(open_.values()):
        entry = json.dumps([matched(rule, aid, payload)])
        for nid in sorted({row["notification_id"] for row in open_.values()}):
            await tx.fetchval("alert_incident_message_add", id=nid, rule=rule, matched=entry)
        for c in causes:
            await tx.execute("alert_incident_join", project=project, channel=channel, cause=c, alert_id=aid,
                             rule=rule, now=now)
        return False
    payload = {**payload, "rules": [rule], "matched": [matched(rule, aid, payload)]}
    nid = await tx.fetchval("notification_enqueue", project=project, channel=channel, key=key, alert_id=aid,
                            kind="firing", severity=severity, payload=to_json(payload, indent=None), now=now)
    if nid is None:             # the same decision made before (its key exists): its incidents are recorded
        return True
    for c, row in open_.items():
        if row is None:
            await tx.execute("alert_incident_open_new", project=project, channel=channel, cause=c,
                             notification_id=nid, alert_id=aid, rule=rule, now=now)
        else:
            await tx.execute("alert_incident_join", project=project, channel=channel, cause=c, alert_id=aid,
                             rule=rule, now=now)
    return True
