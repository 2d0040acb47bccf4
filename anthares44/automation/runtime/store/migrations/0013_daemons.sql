-- 0013_daemons: every daemon says it is alive (a heartbeat row, refreshed every few seconds), so a verb that
-- creates or lists runs can tell a user that no daemon has been seen for a while instead of letting runs wait in
-- `pending` in silence. One row per worker id, updated in place: O(daemons), never a log.
create table automation.daemons (
    worker_id    text        not null,
    host         text        not null,
    pid          integer     not null,
    version      text        not null,
    started_at   timestamptz not null,
    last_seen_at timestamptz not null,
    stopped_at   timestamptz,               -- set by a clean shutdown; a crashed daemon just stops being seen
    in_flight    integer     not null default 0,
    constraint daemons_pkey primary key (worker_id)
);
