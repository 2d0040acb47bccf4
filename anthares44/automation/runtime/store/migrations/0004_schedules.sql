-- 0004_schedules: the scheduler's memory (SPEC §11, docs/schedules.md). One row per occurrence of a schedule
-- trigger that the scheduler decided about. The unique key on (project_id, occurrence_key), where the key is
-- `{trigger_id}:{occurrence_iso}` derived from the schedule alone, is what makes two schedulers waking together
-- start an occurrence once: only the winning insert goes on to create the run.
create table automation.schedule_occurrences (
    project_id     text        not null,
    trigger_id     text        not null,
    occurrence_key text        not null,
    fire_at        timestamptz not null,     -- the firing instant (UTC)
    status         text        not null,
    run_id         text,                     -- set once the run exists (idempotency key = occurrence_key)
    catch_up       boolean     not null default false,   -- recovered after downtime (catchUp)
    expires_at     timestamptz,              -- a queued occurrence that has not started by then is `expired`
    error_code     text,                     -- why a started occurrence could not create its run
    created_at     timestamptz not null,
    updated_at     timestamptz not null,
    constraint schedule_occurrences_pkey primary key (project_id, occurrence_key),
    constraint schedule_occurrences_status_check check (status in ('started', 'skipped_overlap', 'queued',
        'expired', 'missed'))
);
-- the cursor of a trigger (its latest decided occurrence) and its history, newest first
create index schedule_occurrences_trigger_idx on automation.schedule_occurrences (project_id, trigger_id, fire_at desc);
-- the waiting line of `overlap: queue` / catch-up, and started occurrences whose run is not recorded yet
create index schedule_occurrences_pending_idx on automation.schedule_occurrences (project_id, trigger_id, fire_at)
    where status = 'queued' or (status = 'started' and run_id is null);

-- `overlap` asks "is a run of this trigger still going?": unfinished runs by trigger.
create index runs_trigger_active_idx on automation.runs (project_id, trigger_id)
    where trigger_id is not null and state not in ('succeeded', 'failed', 'compensation_failed', 'cancelled');
