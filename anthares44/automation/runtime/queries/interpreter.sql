-- The interpreter's writes and reads (engine/). Every write of a lease holder first passes run_fence in the
-- same transaction, so a worker whose lease was re-granted writes nothing; run state changes go through
-- run_transition, which refuses a transition the state machine (engine/states.py, docs/states.md) does not allow.

-- name: run_fence
-- purpose: lock the run for this transaction if ($2, grant $3) still holds its lease, noting the current step, and defer this transaction's NOTIFYs to the engine (0006); no row = lease lost
update automation.runs
set current_step = coalesce($4, current_step), updated_at = $5
where run_id = $1 and lease_owner = $2 and lease_grants = $3
returning state, set_config('a44.notify', 'deferred', true);

-- name: engine_notify
-- purpose: after commit, wake `logs --follow` / `run --wait` of runs $1 (a44_run_events) and daemons for the earliest due time $2 in epoch ms (a44_runs_due), in one statement
select count(*) from (
    select pg_notify('a44_run_events', r) from unnest($1::text[]) as r
    union all
    select pg_notify('a44_runs_due', $2::text) where $2::text is not null
) n;

-- name: run_transition
-- purpose: move a leased run to state $4 only from one of $5 (else no row), optionally releasing the lease, and log run.state
with prev as (
    select run_id, state from automation.runs
    where run_id = $1 and lease_owner = $2 and lease_grants = $3
    for update
), r as (
    update automation.runs r
    set state = $4, next_wake_at = $6,
        lease_owner = case when $7 then null else r.lease_owner end,
        lease_deadline = case when $7 then null else r.lease_deadline end,
        failed_step = coalesce($8, r.failed_step), error_code = coalesce($9, r.error_code),
        error_message = coalesce($10, r.error_message), result = coalesce($11::jsonb, r.result),
        summary = coalesce($12::jsonb, r.summary),
        finished_at = case when $13 then $14 else r.finished_at end, updated_at = $14
    from prev
    where r.run_id = prev.run_id and prev.state = any($5::text[])
    returning r.run_id, r.project_id, r.state, r.next_wake_at, prev.state as prev_state
), ev as (
    insert into automation.run_events (run_id, project_id, at, kind, state, step_id, error_code, message, data)
    select run_id, project_id, $14, 'run.state', state, $8, $9, $10,
           jsonb_build_object('from', prev_state, 'next_wake_at', next_wake_at)
    from r
    where prev_state <> state
)
select (select state from prev) as prev_state, (select state from r) as new_state;

-- name: engine_attempt_start
-- purpose: insert a running attempt row of a leased run and log attempt.started, in one statement
with a as (
    insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, started_at, epoch,
                                          kind, project_id, worker_id, lease_grant)
    values ($1, $2, $3, $4, 'running', $5, $6, $7, $8, $9, $10)
    returning run_id, step_id, attempt, epoch, kind, project_id, started_at
)
insert into automation.run_events (run_id, project_id, at, kind, step_id, attempt, status, data)
select run_id, project_id, started_at, 'attempt.started', step_id, attempt, 'running',
       jsonb_build_object('epoch', epoch, 'kind', kind)
from a
returning id;

-- name: engine_attempt_finish
-- purpose: finish a running attempt (status, error, result or reference, retry due time) and log attempt.finished; no row = not running
with a as (
    update automation.step_attempts
    set status = $7, error_code = $8, error_message = $9, result = $10::jsonb, result_ref = $11,
        result_bytes = $12, finished_at = $13, retry_at = $14
    where run_id = $1 and step_id = $2 and epoch = $3 and kind = $4 and attempt = $5 and started_at = $6
      and status = 'running'
    returning run_id, project_id, step_id, attempt, epoch, kind, status, error_code, error_message,
              started_at, finished_at, retry_at
)
insert into automation.run_events (run_id, project_id, at, kind, step_id, attempt, status, error_code, message, data)
select run_id, project_id, finished_at, 'attempt.finished', step_id, attempt, status, error_code, error_message,
       jsonb_build_object('epoch', epoch, 'kind', kind, 'retry_at', retry_at,
                          'duration_ms', round(extract(epoch from finished_at - started_at) * 1000))
from a
returning id;

-- name: engine_attempt_record
-- purpose: insert an attempt already finished: started at $5, finished at $18 (skipped by `if`, failed by deadline or expression, confirmed by a person, or a `pass` step run on the spot) and log it
with a as (
    insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, error_code,
                                          error_message, result, started_at, finished_at, epoch, kind,
                                          project_id, worker_id, lease_grant, result_bytes, retry_at, result_ref)
    values ($1, $2, $3, $4, $11, $12, $13, $14::jsonb, $5, $18, $6, $7, $8, $9, $10, $15, $16, $17)
    returning run_id, step_id, attempt, epoch, kind, project_id, started_at, finished_at, status, error_code,
              error_message, retry_at
)
insert into automation.run_events (run_id, project_id, at, kind, step_id, attempt, status, error_code, message, data)
select run_id, project_id, finished_at, 'attempt.finished', step_id, attempt, status, error_code, error_message,
       jsonb_build_object('epoch', epoch, 'kind', kind, 'retry_at', retry_at,
                          'duration_ms', round(extract(epoch from finished_at - started_at) * 1000))
from a
returning id;

-- name: engine_attempts_of_run
-- purpose: every attempt of a run's epoch, in start order, to rebuild where the run stands
select step_id, kind, attempt, status, error_code, error_message, result, result_ref, started_at, finished_at,
       retry_at
from automation.step_attempts
where run_id = $1 and epoch = $2
order by started_at, kind, attempt;

-- name: engine_completion_order
-- purpose: the steps of a run's epoch in the order their action succeeded (log order), for reverse-order compensation
select step_id
from automation.run_events
where run_id = $1 and kind = 'attempt.finished' and status = 'succeeded'
  and data ->> 'kind' = 'action' and (data ->> 'epoch')::integer = $2
order by id;

-- name: confirmation_resolve
-- purpose: a person resolved the exclusive step $2 of a run parked in awaiting_confirmation: due again now ($3); no row = not parked on that step
with prev as (
    select run_id, state from automation.runs
    where run_id = $1 and state = 'awaiting_confirmation' and current_step = $2
    for update
), r as (
    update automation.runs r
    set state = 'pending', next_wake_at = $3, updated_at = $3,
        error_code = null, error_message = null
    from prev
    where r.run_id = prev.run_id
    returning r.run_id, r.project_id, r.epoch, r.state, prev.state as prev_state
), ev as (
    insert into automation.run_events (run_id, project_id, at, kind, state, step_id, data)
    select run_id, project_id, $3, 'run.state', state, $2,
           jsonb_build_object('from', prev_state, 'outcome', $4::text, 'by', $5::text)
    from r
)
select run_id, project_id, epoch from r;

-- name: confirmation_last_attempt
-- purpose: the highest action attempt number of a step in the run's epoch (the resolved attempt follows it)
select coalesce(max(attempt), 0)
from automation.step_attempts
where run_id = $1 and step_id = $2 and epoch = $3 and kind = 'action';
