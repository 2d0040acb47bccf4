-- Waits and signals of runs (§20, docs/waits.md, migration 0033): the engine opens and times out a step's wait;
-- a person or a program sends a signal to a run.

-- name: wait_open
-- purpose: open the wait of step :step_id of run :run_id (epoch :epoch) on :kind :key until :timeout_at (idempotent), consuming the oldest buffered signal of that name; returns (state, output, timeout_at)
select state, output, timeout_at
from automation.wait_open(:run_id::text, :epoch::integer, :step_id::text, :kind::text, :key::text,
                          :timeout_at::timestamptz, :now::timestamptz);

-- name: wait_timeout
-- purpose: time out the wait of step :step_id of run :run_id (epoch :epoch) at :now unless it closed first; returns (state, output, timeout_at)
select state, output, timeout_at
from automation.wait_timeout(:run_id::text, :epoch::integer, :step_id::text, :now::timestamptz);

-- name: run_signal
-- purpose: send signal :name with :data (idempotency key :key, by :by) to run :run_id of project :project at :now; returns (outcome, state, seq)
select outcome, state, seq
from automation.run_signal(:project::text, :run_id::text, :name::text, :data::jsonb, :key::text, :by::text,
                           :now::timestamptz);

-- name: run_waits_of_run
-- purpose: the waits of run :run_id (every epoch), oldest first: what `runs show` says a run waits on
select epoch, step_id, kind, key, state, opened_at, timeout_at, closed_at, satisfied_by, resumed_at
from automation.run_waits
where run_id = :run_id
order by opened_at, step_id;

-- name: run_waits_open_of_runs
-- purpose: the open wait of each of the runs :run_ids (the oldest when several): what `runs` says a waiting run waits on
select distinct on (run_id) run_id, kind, key, step_id, timeout_at
from automation.run_waits
where run_id = any(:run_ids::text[]) and state = 'open'
order by run_id, opened_at;

-- name: metrics_waits
-- purpose: open waits per project and kind, and the age at :now of the oldest (seconds): automation_waits_open{kind} and automation_oldest_wait_age_seconds
select r.project_id, w.kind, count(*)::bigint as open,
       extract(epoch from (:now::timestamptz - min(w.opened_at)))::float8 as oldest_age_s
from automation.run_waits w
join automation.runs r on r.run_id = w.run_id
where w.state = 'open'
group by r.project_id, w.kind
order by r.project_id, w.kind;
