-- 0001_init: the durable log of a44 automation (SPEC §7, §8.2, §3.8, §13).
-- Applied in one transaction under the migration advisory lock (migrations.py). Never edit once released:
-- add 0002_... instead.

create schema if not exists automation;

-- Published IR, immutable once written (§3.8). Runs pin (workflow_id, version).
create table automation.workflow_versions (
    project_id   text        not null,
    workflow_id  text        not null,
    version      integer     not null check (version > 0),
    sha256       text        not null check (sha256 <> ''),
    ir           jsonb       not null,
    published_at timestamptz not null,
    constraint workflow_versions_pkey primary key (project_id, workflow_id, version)
);

-- One row per run. `next_wake_at` is "when must a worker look at this run next": the due time of a pending
-- run, of a retry delay or a durable sleep, and, while a worker holds the lease, the lease deadline. One
-- partial index on it therefore finds both due runs and runs whose worker died (§7.2), so grant latency
-- depends on the number of due runs, not on the size of the log (§7.5).
create table automation.runs (
    run_id          text        not null,
    project_id      text        not null,
    workflow_id     text        not null,
    version         integer     not null,
    state           text        not null,
    input           jsonb       not null default '{}'::jsonb,
    idempotency_key text        not null,
    trigger_id      text,
    event_id        text,
    partition_key   text,
    queue           text,
    epoch           integer     not null default 0,      -- bumped by replay (§13): attempts of older epochs are history
    current_step    text,
    failed_step     text,
    error_code      text,
    error_message   text,
    result          jsonb,
    summary         jsonb,                               -- items in / out / in error (§16)
    lease_owner     text,
    lease_deadline  timestamptz,
    lease_grants    integer     not null default 0,      -- grants so far; an attempt records which one it ran under
    lease_reclaims  integer     not null default 0,      -- grants that took over an expired lease (§7.2)
    next_wake_at    timestamptz,
    deadline_at     timestamptz not null,                -- created_at + 72 h wall clock (§3.1)
    created_at      timestamptz not null,
    started_at      timestamptz,
    finished_at     timestamptz,
    updated_at      timestamptz not null,
    constraint runs_pkey primary key (run_id),
    constraint runs_version_fkey foreign key (project_id, workflow_id, version)
        references automation.workflow_versions (project_id, workflow_id, version),
    constraint runs_state_check check (state in ('pending', 'running', 'waiting', 'sleeping', 'awaiting_confirmation',
        'compensating', 'succeeded', 'failed', 'compensation_failed', 'cancelled')),
    constraint runs_lease_check check ((lease_owner is null) = (lease_deadline is null))
);
create index runs_due_idx on automation.runs (next_wake_at)
    where next_wake_at is not null;
create index runs_project_created_idx on automation.runs (project_id, created_at desc);
create index runs_project_state_idx on automation.runs (project_id, state, created_at desc);
create index runs_project_workflow_idx on automation.runs (project_id, workflow_id, created_at desc);
create index runs_partition_idx on automation.runs (project_id, queue, partition_key, created_at)
    where state not in ('succeeded', 'failed', 'compensation_failed', 'cancelled');

-- §8.2: one row per (project, key). A key older than 24 h is recycled by overwriting its row (create_run).
create table automation.idempotency_keys (
    project_id text        not null,
    key        text        not null,
    run_id     text        not null,
    created_at timestamptz not null,
    constraint idempotency_keys_pkey primary key (project_id, key)
);
create index idempotency_keys_created_idx on automation.idempotency_keys (created_at);

-- §7.4: one row per step attempt, partitioned by month of started_at (UTC). The primary key must contain the
-- partition key, hence started_at in it; (run_id, step_id, epoch, kind, attempt) is unique in practice because
-- only the lease holder of a run writes its attempts.
create table automation.step_attempts (
    run_id          text        not null,
    step_id         text        not null,
    attempt         integer     not null check (attempt >= 1),
    idempotency_key text        not null,
    status          text        not null,
    error_code      text,
    started_at      timestamptz not null,
    finished_at     timestamptz,
    result          jsonb,                               -- at most 256 KB (enforced by the store)
    result_ref      text,                                -- file:// URI of a larger result under $A44_HOME/results
    result_bytes    integer,
    error_message   text,
    epoch           integer     not null default 0,
    kind            text        not null default 'action',
    project_id      text        not null,
    worker_id       text,
    lease_grant     integer,
    constraint step_attempts_pkey primary key (run_id, step_id, epoch, kind, attempt, started_at),
    constraint step_attempts_run_fkey foreign key (run_id) references automation.runs (run_id) on delete cascade,
    constraint step_attempts_status_check check (status in ('running', 'succeeded', 'failed', 'timeout', 'skipped',
        'compensated', 'compensation_failed', 'lease_expired')),
    constraint step_attempts_kind_check check (kind in ('action', 'compensation')),
    constraint step_attempts_finished_check check ((status = 'running') = (finished_at is null)),
    constraint step_attempts_result_check check (result is null or result_ref is null)
) partition by range (started_at);
create index step_attempts_project_step_idx on automation.step_attempts (project_id, step_id, started_at);

-- Safety net: an attempt whose month has no partition yet (clock far ahead, daemon not restarted for months)
-- still lands instead of failing the step. ensure_step_attempt_partitions moves such rows out when it creates
-- the month's partition, so the default partition stays empty in normal operation.
create table automation.step_attempts_default partition of automation.step_attempts default;

-- Creates the monthly partitions from the month of p_at to p_months_ahead months later (UTC). Idempotent and
-- safe to call concurrently (transaction advisory lock). Returns how many partitions it created.
create function automation.ensure_step_attempt_partitions(p_at timestamptz, p_months_ahead integer)
returns integer
language plpgsql
as $$
declare
    first_month timestamp := date_trunc('month', p_at at time zone 'UTC');
    lo timestamptz;
    hi timestamptz;
    part text;
    created integer := 0;
begin
    perform pg_advisory_xact_lock(hashtext('a44.automation.step_attempts.partitions'));
    for i in 0 .. p_months_ahead loop
        lo := (first_month + make_interval(months => i)) at time zone 'UTC';
        hi := (first_month + make_interval(months => i + 1)) at time zone 'UTC';
        part := 'step_attempts_y' || to_char(lo at time zone 'UTC', 'YYYY') || 'm' || to_char(lo at time zone 'UTC', 'MM');
        if to_regclass('automation.' || part) is null then
            execute format('create table automation.%I (like automation.step_attempts including defaults including constraints)', part);
            -- rows that fell into the default partition for this month move to their partition first,
            -- otherwise the attach would fail on them
            execute format('with moved as (delete from automation.step_attempts_default where started_at >= %L and started_at < %L returning *) '
                           'insert into automation.%I select * from moved', lo, hi, part);
            execute format('alter table automation.step_attempts attach partition automation.%I for values from (%L) to (%L)',
                           part, lo, hi);
            created := created + 1;
        end if;
    end loop;
    return created;
end
$$;

-- Append-only log of everything that happens to a run; `id` orders it, so `logs --follow` resumes after the
-- last id it printed. Each insert notifies channel a44_run_events with the run id (LISTEN, not polling).
create table automation.run_events (
    id         bigint generated always as identity,
    run_id     text        not null,
    project_id text        not null,
    at         timestamptz not null,
    kind       text        not null,
    state      text,
    step_id    text,
    attempt    integer,
    status     text,
    error_code text,
    message    text,
    data       jsonb,
    constraint run_events_pkey primary key (id)
);
create index run_events_run_idx on automation.run_events (run_id, id);

create function automation.notify_run_event()
returns trigger
language plpgsql
as $$
begin
    perform pg_notify('a44_run_events', new.run_id);
    return null;
end
$$;

create trigger run_events_notify after insert on automation.run_events
    for each row execute function automation.notify_run_event();
