-- Replay (§13, docs/replay.md): select runs, read what their current epoch recorded, and open a new epoch in
-- which the reused steps' results are carried over (copies marked worker_id = 'reused') and the rest run again.

-- name: replay_select
-- purpose: runs of project :project matching explicit ids :run_ids or the runs-list filters (state :state, workflow :workflow, step :step, created since :since), oldest first
select r.run_id, r.workflow_id, r.version, r.state, r.epoch, r.failed_step, r.created_at
from automation.runs r
where r.project_id = :project
  and (:run_ids::text[] is null or r.run_id = any(:run_ids::text[]))
  and (:state::text is null or r.state = :state)
  and (:workflow::text is null or r.workflow_id = :workflow)
  and (:step::text is null or r.failed_step = :step or r.current_step = :step
       or exists (select 1 from automation.step_attempts a where a.run_id = r.run_id and a.step_id = :step))
  and (:since::timestamptz is null or r.created_at >= :since)
order by r.created_at, r.run_id;

-- name: replay_attempts
-- purpose: every attempt of runs :run_ids in their current epoch, in start order (what a replay plan reads; the log order of each comes from replay_attempt_events)
select a.run_id, a.step_id, a.kind, a.attempt, a.status, a.started_at, a.finished_at, a.worker_id, a.epoch
from automation.step_attempts a
join automation.runs r on r.run_id = a.run_id and r.epoch = a.epoch
where a.run_id = any(:run_ids::text[])
order by a.run_id, a.started_at;

-- name: replay_attempt_events
-- purpose: the id of the first log event of each attempt of runs :run_ids, by (run, step, attempt, epoch, kind): read in one pass and matched to the attempts by the caller (a lookup per attempt, correlated or joined, read the run's events once per attempt: quadratic for a 100,000-item fan-out)
select e.run_id, e.step_id, e.attempt, (e.data ->> 'epoch')::integer as epoch, e.data ->> 'kind' as kind,
       min(e.id) as seq
from automation.run_events e
where e.run_id = any(:run_ids::text[]) and e.kind in ('attempt.started', 'attempt.finished')
group by 1, 2, 3, 4, 5;

-- name: replay_lock
-- purpose: lock a run for its replay and say whether replay request :request already replayed it
select r.run_id, r.project_id, r.state, r.epoch, r.version,
       exists (select 1 from automation.run_events e
               where e.run_id = r.run_id and e.kind = 'run.replayed' and e.data ->> 'request' = :request::text) as done
from automation.runs r
where r.run_id = :run_id
for update;

-- name: replay_copy_reused
-- purpose: carry the recorded result (and a sleep's stored due instant) of each reused step (:steps) from epoch :from_epoch into epoch :to_epoch (copies marked worker_id 'reused'), logging attempt.finished in the original completion order
with src as (
    select distinct on (a.step_id) a.*
    from automation.step_attempts a
    where a.run_id = :run_id and a.epoch = :from_epoch and a.kind = 'action' and a.step_id = any(:steps::text[])
      and a.status in ('succeeded', 'skipped')
    order by a.step_id, a.attempt desc
), ins as (
    insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, error_code,
                                          started_at, finished_at, result, result_ref, result_bytes,
                                          error_message, epoch, kind, project_id, worker_id, lease_grant, retry_at,
                                          due_at)
    select run_id, step_id, attempt, idempotency_key, status, error_code, started_at, finished_at, result,
           result_ref, result_bytes, error_message, :to_epoch, kind, project_id, 'reused', null, null, due_at
    from src
    returning run_id, project_id, step_id, attempt, status, started_at, finished_at
), ord as (
    select ins.*, array_position(:steps::text[], ins.step_id) as pos from ins
), ev as (
    insert into automation.run_events (run_id, project_id, at, kind, step_id, attempt, status, data)
    select run_id, project_id, :now, 'attempt.finished', step_id, attempt, status,
           jsonb_build_object('epoch', :to_epoch::integer, 'kind', 'action', 'reused_from_epoch', :from_epoch::integer,
                              'duration_ms', round(extract(epoch from finished_at - started_at) * 1000))
    from ord
    order by pos
    returning id
)
select count(*) from ev;

-- name: replay_begin
-- purpose: open epoch :epoch of a terminal run: pending and due at :now on version :version with a fresh wall-clock deadline :deadline, log run.state and run.replayed (:data data)
with prev as (
    select run_id, state from automation.runs where run_id = :run_id for update
), r as (
    update automation.runs r
    set state = 'pending', epoch = :epoch, version = :version, next_wake_at = :now, deadline_at = :deadline,
        lease_owner = null, lease_deadline = null, current_step = null, failed_step = null, error_code = null,
        error_message = null, result = null, summary = null, finished_at = null, updated_at = :now
    from prev
    where r.run_id = prev.run_id and prev.state in ('succeeded', 'partial', 'failed', 'cancelled')
    returning r.run_id, r.project_id, r.state, prev.state as prev_state
), ev as (
    insert into automation.run_events (run_id, project_id, at, kind, state, data)
    select run_id, project_id, :now, 'run.state', state,
           jsonb_build_object('from', prev_state, 'epoch', :epoch::integer, 'replay', :data::jsonb ->> 'request')
    from r
    union all
    select run_id, project_id, :now, 'run.replayed', state, :data::jsonb from r
)
select run_id from r;
