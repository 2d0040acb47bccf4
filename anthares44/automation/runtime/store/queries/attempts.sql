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
       project_id, worker_id, lease_grant, due_at
from automation.step_attempts
where run_id = :run_id
order by started_at asc, attempt asc;

-- name: attempts_page
-- purpose: the console run page's attempts: :limit of a run after a keyset position (start order), results only when inline and at most :inline_max bytes
select step_id, attempt, idempotency_key, status, error_code, started_at, finished_at,
       finished_at - started_at as duration, result_bytes, error_message, epoch, kind, worker_id, due_at,
       result_ref is not null as result_stored,
       case when result_ref is null and result_bytes <= :inline_max then result end as result
from automation.step_attempts
where run_id = :run_id
  and (:after_at::timestamptz is null
       or (started_at, attempt, step_id, epoch, kind) > (:after_at::timestamptz, :after_attempt::integer,
                                                          :after_step::text, :after_epoch::integer, :after_kind::text))
order by started_at, attempt, step_id, epoch, kind
limit :limit;

-- name: attempts_count_of_run
-- purpose: how many attempts a run has (the console run page's "N attempts")
select count(*) from automation.step_attempts where run_id = :run_id;

-- name: attempts_latest_per_step
-- purpose: the latest attempt of each step and kind in one epoch of a run (the step graph's colours and the failing step), in start order
select * from (
    select distinct on (step_id, kind) step_id, kind, attempt, epoch, status, error_code, error_message, started_at
    from automation.step_attempts
    where run_id = :run_id and epoch = :epoch
    order by step_id, kind, started_at desc, attempt desc
) latest
order by started_at, attempt;

-- name: attempt_result_row
-- purpose: one attempt of a run with its inline result or object reference (the console's on-demand result)
select step_id, attempt, epoch, kind, status, started_at, result, result_ref, result_bytes
from automation.step_attempts
where run_id = :run_id and step_id = :step_id and epoch = :epoch and kind = :kind and attempt = :attempt
order by started_at desc
limit 1;
