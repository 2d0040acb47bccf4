-- Runs and their idempotency keys (§8.2, §8.5, §13).

-- fragment: run_create_rows
-- purpose: the writes of creating a run, once the CTE `target` holds the version to run and its IR's deadline_ms (no row: nothing is written; an IR without deadline_ms runs until :deadline): claim the idempotency key :key for run :run_id (recycling one older than the window :window), insert the pending run and log run.created; run_create and webhook_ingest both include it
claim as (
    insert into automation.idempotency_keys as k (project_id, key, run_id, created_at)
    select :project, :key, :run_id, :now from target
    on conflict (project_id, key) do update
        set run_id = excluded.run_id, created_at = excluded.created_at
        where k.created_at <= excluded.created_at - :window::interval
    returning run_id
), run as (
    insert into automation.runs (run_id, project_id, workflow_id, version, state, input, idempotency_key,
                                 trigger_id, event_id, partition_key, queue, next_wake_at, deadline_at,
                                 created_at, updated_at)
    select claim.run_id, :project, :workflow_id, target.version, 'pending', :input::jsonb, :key, :trigger_id, :event_id, :partition_key, :queue, :now,
           coalesce(:now::timestamptz + target.deadline_ms * interval '1 millisecond', :deadline), :now, :now
    from claim, target
    returning run_id, version
), ev as (
    insert into automation.run_events (run_id, project_id, at, kind, state, data)
    select run_id, :project, :now, 'run.created', 'pending',
           jsonb_build_object('version', version, 'idempotency_key', :key::text)
    from run
)

-- fragment: run_create_target
-- purpose: the CTE `target`: the version of :workflow_id to run (the latest, or :version) and its IR's deadline_ms; run_create and run_create_initiated include it
target as (
    select version, (ir ->> 'deadline_ms')::bigint as deadline_ms
    from automation.workflow_versions
    where project_id = :project and workflow_id = :workflow_id and (:version::integer is null or version = :version)
    order by version desc
    limit 1
)

-- name: run_create
-- purpose: claim the idempotency key (recycling one older than the window), insert the pending run and log it, in one statement
with
-- include: run_create_target
,
-- include: run_create_rows
select (select version from target) as version, (select run_id from run) as created_run_id;

-- name: idempotency_key_get
-- purpose: the run that holds an idempotency key and since when
select run_id, created_at from automation.idempotency_keys where project_id = :project and key = :key;

-- name: run_get
-- purpose: one run with everything recorded on it, and the open timers of its epoch (§19: each sleeping step and the due instant stored when it opened, earliest first; `due_at` the earliest)
select r.*, t.timer_steps, t.timer_attempts, t.timer_dues, t.due_at
from automation.runs r
cross join lateral (
    select coalesce(array_agg(a.step_id order by a.due_at, a.step_id), '{}') as timer_steps,
           coalesce(array_agg(a.attempt order by a.due_at, a.step_id), '{}') as timer_attempts,
           coalesce(array_agg(a.due_at order by a.due_at, a.step_id), '{}') as timer_dues,
           min(a.due_at) as due_at
    from automation.step_attempts a
    where a.run_id = r.run_id and a.epoch = r.epoch and a.kind = 'action' and a.status = 'running'
      and a.due_at is not null
) t
where r.run_id = :run_id and (:project::text is null or r.project_id = :project);

-- name: runs_list
-- purpose: runs of a project filtered by state, workflow, step (current, failed or attempted) and age, newest first
select r.run_id, r.project_id, r.workflow_id, r.version, r.state, r.idempotency_key, r.trigger_id,
       r.partition_key, r.queue, r.epoch, r.current_step, r.failed_step, r.error_code, r.error_message,
       r.lease_owner, r.lease_reclaims, r.next_wake_at, r.created_at, r.started_at, r.finished_at, r.updated_at,
       (r.summary ->> 'rows_in')::bigint as rows_in, (r.summary ->> 'rows_out')::bigint as rows_out,
       (r.summary ->> 'rows_in_error')::bigint as rows_in_error
from automation.runs r
where r.project_id = :project
  and (:state::text is null or r.state = :state)
  and (:workflow::text is null or r.workflow_id = :workflow)
  and (:step::text is null or r.failed_step = :step or r.current_step = :step
       or exists (select 1 from automation.step_attempts a where a.run_id = r.run_id and a.step_id = :step))
  and (:since::timestamptz is null or r.created_at >= :since)
order by r.created_at desc, r.run_id desc
limit :limit offset :offset;

-- name: runs_count
-- purpose: how many runs match the runs_list filters (the total printed first)
select count(*)
from automation.runs r
where r.project_id = :project
  and (:state::text is null or r.state = :state)
  and (:workflow::text is null or r.workflow_id = :workflow)
  and (:step::text is null or r.failed_step = :step or r.current_step = :step
       or exists (select 1 from automation.step_attempts a where a.run_id = r.run_id and a.step_id = :step))
  and (:since::timestamptz is null or r.created_at >= :since);

-- fragment: runs_search_where
-- purpose: the console's run filters: runs of :project by state, workflow, step (current, failed or attempted), error code, partition key, created in [:since, :until)
where r.project_id = :project
  and (:state::text is null or r.state = :state)
  and (:workflow::text is null or r.workflow_id = :workflow)
  and (:step::text is null or r.failed_step = :step or r.current_step = :step
       or exists (select 1 from automation.step_attempts a where a.run_id = r.run_id and a.step_id = :step))
  and (:error_code::text is null or r.error_code = :error_code)
  and (:partition_key::text is null or r.partition_key = :partition_key)
  and (:since::timestamptz is null or r.created_at >= :since)
  and (:until::timestamptz is null or r.created_at < :until)

-- name: runs_search
-- purpose: one keyset page of the console's runs list, newest first, strictly after the cursor (:before_at, :before_id)
select r.run_id, r.project_id, r.workflow_id, r.version, r.state, r.idempotency_key, r.trigger_id,
       r.partition_key, r.queue, r.epoch, r.current_step, r.failed_step, r.error_code, r.error_message,
       r.created_at, r.started_at, r.finished_at,
       (r.summary ->> 'rows_in')::bigint as rows_in, (r.summary ->> 'rows_out')::bigint as rows_out,
       (r.summary ->> 'rows_in_error')::bigint as rows_in_error
from automation.runs r
-- include: runs_search_where
  and (:before_at::timestamptz is null or (r.created_at, r.run_id) < (:before_at, :before_id::text))
order by r.created_at desc, r.run_id desc
limit :limit;

-- name: runs_search_count
-- purpose: how many runs match the runs_search filters, counted up to :cap (the console prints "cap+" beyond it, so the total stays cheap over millions of runs)
select count(*) from (
    select 1
    from automation.runs r
    -- include: runs_search_where
    limit :cap
) matching;

-- name: run_epochs
-- purpose: the replays of a run (each run.replayed event: its epoch, when, from which step, what it reused), oldest first
select at, data from automation.run_events
where run_id = :run_id and kind = 'run.replayed'
order by id;

-- name: runs_export_sample
-- purpose: a random sample of up to :sample finished runs of workflow :workflow_id created since :since (states :states), oldest first (runs export)
select run_id from (
    select run_id, created_at from automation.runs
    where project_id = :project and workflow_id = :workflow_id and created_at >= :since
      and state = any(:states::text[])
    order by random()
    limit :sample
) picked
order by created_at, run_id;
