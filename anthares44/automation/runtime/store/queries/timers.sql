-- Durable timers (§19, migration 0034, docs/timers.md): a person moves a sleep's stored due instant.

-- name: timer_move
-- purpose: move the due instant of the open sleep :step of run :run_id (project :project) to :due at :now, logging :kind (timer.woken | timer.rescheduled) with who (:who) and why (:reason); returns moved | no_run | not_sleeping | due | past_deadline, and the run's deadline
select automation.timer_move(:project::text, :run_id::text, :step::text, :due::timestamptz, :now::timestamptz,
                             :kind::text, :who::text, :reason::text) as outcome,
       (select deadline_at from automation.runs where run_id = :run_id) as deadline_at;
