"""The dead-letter queue's one insert path: an envelope that never became a run (invalid, too old, a redrive that
failed again) is kept byte for byte under a `dlq_<ULID>` id. Runs that failed are dead-lettered by the queue
statements (`engine_op_queue_run_failed` of migration 0018, the max-age sweep) with the same prefix."""

from __future__ import annotations

from ...errors import A44Error
from .ids import new_id


def _stored_text(raw: bytes | str) -> tuple[str, bytes | None]:
    """(text kept in `envelope`, exact bytes when they are not valid UTF-8 or hold NUL)."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    try:
        text = raw.decode("utf-8")
        if "\x00" not in text:
            return text, None
    except UnicodeDecodeError:
        pass
    return raw.decode("utf-8", "replace").replace("\x00", "\ufffd"), bytes(raw)


async def dead_letter(conn, project, queue, workflow_id, trigger_id, raw, err: A44Error, now, redrive_of=None,
                      event_id=None, attempts=0) -> str:
    """Insert one dead letter on `conn` (in the caller's transaction); returns its id."""
    text, exact = _stored_text(raw)
    dl_id = new_id("dlq", now)
    await conn.execute("dlq_insert", dead_letter_id=dl_id, project=project, queue=queue, trigger_id=trigger_id,
                       workflow_id=workflow_id, event_id=event_id, envelope=text, envelope_bytes=exact,
                       error_code=err.code, error_message=err.message, attempts=attempts, now=now,
                       redrive_of=redrive_of)
    return dl_id
