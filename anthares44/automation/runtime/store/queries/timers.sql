-- Durable timers (§19, migration 0034, docs/timers.md): a person moves a sleep's stored due instant.

-- name: timer_move
-- purpose: move the due instant of the open sleep :step of run :run_id (project :project) to :due at :now, logging :kind (timer.woken | timer.rescheduled) with who (:who) and why (:reason); returns moved | no_run | not_sleeping | due | past_deadline, and the run's deadline
select automation.timer_move(:project::text, :run_id::text, :step::text, :due::timestamptz, :now::timestamptz,
                             :kind::text, :who::text, :reason::text) as outcome,
       (select deadline_at from automation.runs where run_id = :run_id) as deadline_at;

-- name: timer_fire_due
-- purpose: fire at most :limit due sleeps of runs no worker holds, at :now, in one statement (0035: each run's row locked, skip locked; the attempt finished only while still running with its instant); returns how many fired
select automation.timer_fire_due(:now::timestamptz, :limit::integer);

-- name: timer_next_due
-- purpose: the earliest stored instant after :now of an open sleep (step_attempts_open_timers), to arm the daemon's timer firing
select min(due_at)
from automation.step_attempts
where status = 'running' and due_at is not null and due_at > :now;
