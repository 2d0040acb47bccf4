-- Workflows in code (§12, sdk/, engine/code_visit.py).

-- name: code_attempts_of_run
-- purpose: every attempt of a code run's epoch :epoch in log order (the order of each attempt's first event), to fast-forward the workflow function (and what `runs export` writes, so `verify` replays in that order)
select a.step_id, a.kind, a.attempt, a.status, a.error_code, a.error_message, a.result, a.result_ref,
       a.started_at, a.finished_at, a.retry_at, a.worker_id, a.due_at, a.idempotency_key, a.epoch
from automation.step_attempts a
left join lateral (
    select min(e.id) as seq from automation.run_events e
    where e.run_id = a.run_id and e.step_id = a.step_id and e.attempt = a.attempt
      and e.kind in ('attempt.started', 'attempt.finished')
      and (e.data ->> 'epoch')::integer = a.epoch and e.data ->> 'kind' = a.kind
) o on true
where a.run_id = :run_id and a.epoch = :epoch
order by o.seq nulls last, a.started_at, a.kind, a.attempt;
