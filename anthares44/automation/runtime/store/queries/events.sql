-- The per-run event log (run_events): append-only; inserts notify channel a44_run_events.

-- name: run_event_append
-- purpose: append one event to a run's log (the engine_op_run_event operation of migration 0018)
select automation.engine_op_run_event(jsonb_build_object(
    'run_id', :run_id::text, 'project', :project::text, 'at', :at::timestamptz, 'kind', :kind::text,
    'state', :state::text, 'step_id', :step_id::text, 'attempt', :attempt::integer, 'status', :status::text,
    'error_code', :error_code::text, 'message', :message::text, 'data', :data::text));

-- name: run_events_list
-- purpose: a run's events after a given id, oldest first (logs --follow resumes from the last id it printed)
select id, run_id, project_id, at, kind, state, step_id, attempt, status, error_code, message, data
from automation.run_events
where run_id = :run_id and id > :after_id
order by id
limit :limit;
