-- The per-run event log (run_events): append-only; inserts notify channel a44_run_events.

-- name: run_event_append
-- purpose: append one event to a run's log
insert into automation.run_events (run_id, project_id, at, kind, state, step_id, attempt, status, error_code,
                                   message, data)
values (:run_id, :project, :at, :kind, :state, :step_id, :attempt, :status, :error_code, :message, :data::jsonb)
returning id;

-- name: run_events_list
-- purpose: a run's events after a given id, oldest first (logs --follow resumes from the last id it printed)
select id, run_id, project_id, at, kind, state, step_id, attempt, status, error_code, message, data
from automation.run_events
where run_id = :run_id and id > :after_id
order by id
limit :limit;
