-- Step attempts (§7.4): one row per attempt, written before the attempt runs and finished after.

-- name: attempt_start
-- purpose: insert a running attempt row and log attempt.started, in one statement (the engine_op_attempt_start operation of migration 0018)
select automation.engine_op_attempt_start(jsonb_build_object(
    'run_id', :run_id::text, 'step_id', :step_id::text, 'attempt', :attempt::integer, 'key', :key::text,
    'started_at', :started_at::timestamptz, 'epoch', :epoch::integer, 'kind', :kind::text, 'project', :project::text,
    'worker_id', :worker_id::text, 'lease_grant', :lease_grant::integer));

-- name: attempt_finish
-- purpose: finish a running attempt (status, error, result or its reference) and log attempt.finished, in one statement
with a as (
    update automation.step_attempts
    set status = :status, error_code = :error_code, error_message = :error_message, result = :result::jsonb, result_ref = :result_ref,
        result_bytes = :result_bytes, finished_at = :finished_at
    where run_id = :run_id and step_id = :step_id and epoch = :epoch and kind = :kind and attempt = :attempt and started_at = :started_at
      and status = 'running'
    returning run_id, project_id, step_id, attempt, epoch, kind, status, error_code, error_message,
              started_at, finished_at
)
insert into automation.run_events (run_id, project_id, at, kind, step_id, attempt, status, error_code, message, data)
select run_id, project_id, finished_at, 'attempt.finished', step_id, attempt, status, error_code, error_message,
       jsonb_build_object('epoch', epoch, 'kind', kind,
                          'duration_ms', round(extract(epoch from finished_at - started_at) * 1000))
from a
returning id;

-- name: attempts_list
-- purpose: every attempt of a run in the order they started (what `logs RUN` prints)
select run_id, step_id, attempt, idempotency_key, status, error_code, started_at, finished_at,
       finished_at - started_at as duration, result, result_ref, result_bytes, error_message, epoch, kind,
       project_id, worker_id, lease_grant
from automation.step_attempts
where run_id = :run_id
order by started_at asc, attempt asc;
