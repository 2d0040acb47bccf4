-- Replay (§13, docs/replay.md): select runs, read what their current epoch recorded, and open a new epoch in
-- which the reused steps' results are carried over (copies marked worker_id = 'reused') and the rest run again.

-- name: replay_select
-- purpose: runs of project $1 matching explicit ids $2 or the runs-list filters (state $3, workflow $4, step $5, created since $6), oldest first
select r.run_id, r.workflow_id, r.version, r.state, r.epoch, r.failed_step, r.created_at
from automation.runs r
where r.project_id = $1
  and ($2::text[] is null or r.run_id = any($2::text[]))
  and ($3::text is null or r.state = $3)
  and ($4::text is null or r.workflow_id = $4)
  and ($5::text is null or r.failed_step = $5 or r.current_step = $5
       or exists (select 1 from automation.step_attempts a where a.run_id = r.run_id and a.step_id = $5))
  and ($6::timestamptz is null or r.created_at >= $6)
order by r.created_at, r.run_id;

-- name: replay_attempts
-- purpose: every attempt of runs $1 in their current epoch, with the order of its first log event (what a replay plan reads)
select a.run_id, a.step_id, a.kind, a.attempt, a.status, a.started_at, a.finished_at, a.worker_id,
       (select min(e.id) from automation.run_events e
        where e.run_id = a.run_id and e.step_id = a.step_id and e.attempt = a.attempt
          and e.kind in ('attempt.started', 'attempt.finished')
          and (e.data ->> 'epoch')::integer = a.epoch and e.data ->> 'kind' = a.kind) as seq
from automation.step_attempts a
join automation.runs r on r.run_id = a.run_id and r.epoch = a.epoch
where a.run_id = any($1::text[])
order by a.run_id, seq nulls last, a.started_at;

-- name: replay_lock
-- purpose: lock a run for its replay and say whether replay request $2 already replayed it
select r.run_id, r.project_id, r.state, r.epoch, r.version,
       exists (select 1 from automation.run_events e
               where e.run_id = r.run_id and e.kind = 'run.replayed' and e.data ->> 'request' = $2::text) as done
from automation.runs r
where r.run_id = $1
for update;

-- name: replay_copy_reused
-- purpose: carry the recorded result of each reused step ($3) from epoch $2 into epoch $4 (copies marked worker_id 'reused'), logging attempt.finished in the original completion order
with src as (
    select distinct on (a.step_id) a.*
    from automation.step_attempts a
    where a.run_id = $1 and a.epoch = $2 and a.kind = 'action' and a.step_id = any($3::text[])
      and a.status in ('succeeded', 'skipped')
    order by a.step_id, a.attempt desc
), ins as (
    insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, error_code,
                                          started_at, finished_at, result, result_ref, result_bytes,
                                          error_message, epoch, kind, project_id, worker_id, lease_grant, retry_at)
    select run_id, step_id, attempt, idempotency_key, status, error_code, started_at, finished_at, result,
           result_ref, result_bytes, error_message, $4, kind, project_id, 'reused', null, null
    from src
    returning run_id, project_id, step_id, attempt, status, started_at, finished_at
), ord as (
    select ins.*, array_position($3::text[], ins.step_id) as pos from ins
), ev as (
    insert into automation.run_events (run_id, project_id, at, kind, step_id, attempt, status, data)
    select run_id, project_id, $5, 'attempt.finished', step_id, attempt, status,
           jsonb_build_object('epoch', $4::integer, 'kind', 'action', 'reused_from_epoch', $2::integer,
                              'duration_ms', round(extract(epoch from finished_at - started_at) * 1000))
    from ord
    order by pos
    returning id
)
select count(*) from ev;

-- name: replay_begin
-- purpose: open epoch $2 of a terminal run: pending and due at $3 on version $4 with a fresh wall-clock deadline $5, log run.state and run.replayed ($6 data)
with prev as (
    select run_id, state from automation.runs where run_id = $1 for update
), r as (
    update automation.runs r
    set state = 'pending', epoch = $2, version = $4, next_wake_at = $3, deadline_at = $5,
        lease_owner = null, lease_deadline = null, current_step = null, failed_step = null, error_code = null,
        error_message = null, result = null, summary = null, finished_at = null, updated_at = $3
    from prev
    where r.run_id = prev.run_id and prev.state in ('succeeded', 'failed', 'cancelled')
    returning r.run_id, r.project_id, r.state, prev.state as prev_state
), ev as (
    insert into automation.run_events (run_id, project_id, at, kind, state, data)
    select run_id, project_id, $3, 'run.state', state,
           jsonb_build_object('from', prev_state, 'epoch', $2::integer, 'replay', $6::jsonb ->> 'request')
    from r
    union all
    select run_id, project_id, $3, 'run.replayed', state, $6::jsonb from r
)
select run_id from r;
