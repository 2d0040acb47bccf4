-- Queries of the application functions (app/automation.py: run --wait, logs --follow).

-- name: run_state
-- purpose: a run's state alone, re-read on every wake-up of `run --wait` and `logs --follow` (no input/result)
select state from automation.runs where run_id = :run_id and (:project::text is null or project_id = :project);
