-- Step attempts (§7.4): one row per attempt, written before the attempt runs and finished after.

-- name: attempt_start
-- purpose: insert a running attempt row and log attempt.started, in one statement
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

-- name: attempt_finish
-- purpose: finish a running attempt (status, error, result or its reference) and log attempt.finished, in one statement
with a as (
    update automation.step_attempts
    set status = $7, error_code = $8, error_message = $9, result = $10::jsonb, result_ref = $11,
        result_bytes = $12, finished_at = $13
    where run_id = $1 and step_id = $2 and epoch = $3 and kind = $4 and attempt = $5 and started_at = $6
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
where run_id = $1
order by started_at asc, attempt asc;
