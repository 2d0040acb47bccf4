-- Deploys (§23, docs/deploys.md): the open runs of a workflow's versions, and moving one run to another version
-- (runtime/run_moves.py), under the run's row lock and only while no worker holds its lease.

-- name: versions_open_runs
-- purpose: each published version of workflow :workflow_id in project :project with its open (non-terminal) run count, oldest open run's creation, and its last run's finish (drained since, when nothing is open); :now is unused but kept for the clock rule
select v.version, v.sha256, v.published_at, (v.ir ->> 'versioning') as versioning,
       count(r.run_id) filter (where r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed',
                                                      'cancelled')) as open_runs,
       min(r.created_at) filter (where r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed',
                                                        'cancelled')) as oldest_open_at,
       max(r.finished_at) as last_finished_at, count(r.run_id) as runs,
       :now::timestamptz as asked_at
from automation.workflow_versions v
left join automation.runs r
  on r.project_id = v.project_id and r.workflow_id = v.workflow_id and r.version = v.version
where v.project_id = :project and v.workflow_id = :workflow_id
group by v.version, v.sha256, v.published_at, v.ir
order by v.version;

-- name: version_ir
-- purpose: the stored IR of version :version of workflow :workflow_id in project :project
select ir from automation.workflow_versions
where project_id = :project and workflow_id = :workflow_id and version = :version;

-- name: version_retire
-- purpose: forget version :version of workflow :workflow_id in project :project once no run names it (the caller checked none is open; finished runs keep it: then nothing is deleted); returns the deleted version
delete from automation.workflow_versions v
where v.project_id = :project and v.workflow_id = :workflow_id and v.version = :version
  and not exists (select 1 from automation.runs r
                  where r.project_id = v.project_id and r.workflow_id = v.workflow_id and r.version = v.version)
  and :now::timestamptz is not null
returning v.version;

-- name: open_runs_page
-- purpose: a page of open runs of workflow :workflow_id in project :project on versions :versions, after run id :after, :limit at most, with their input (for a --filter), epoch and idempotency key (a code run's replay gate) and their attempts of the current epoch as (step_id, kind, status) in start order
select r.run_id, r.version, r.state, r.input, r.created_at, r.lease_owner, r.epoch, r.idempotency_key,
       coalesce((select jsonb_agg(jsonb_build_array(a.step_id, a.kind, a.status) order by a.started_at, a.kind, a.attempt)
                 from automation.step_attempts a
                 where a.run_id = r.run_id and a.epoch = r.epoch), '[]'::jsonb) as attempts
from automation.runs r
where r.project_id = :project and r.workflow_id = :workflow_id and r.version = any(:versions::integer[])
  and r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')
  and r.run_id > :after and :now::timestamptz is not null
order by r.run_id
limit :limit;

-- name: run_move_lock
-- purpose: lock run :run_id of project :project for a move at :now, skipping it when another transaction (a worker's commit, another migrate) holds its row; with its lease and its attempts of the current epoch
select r.run_id, r.workflow_id, r.version, r.state, r.epoch, r.input, r.current_step, r.lease_owner,
       r.lease_deadline, r.lease_deadline < :now::timestamptz as lease_expired,
       coalesce((select jsonb_agg(jsonb_build_array(a.step_id, a.kind, a.status) order by a.started_at, a.kind, a.attempt)
                 from automation.step_attempts a
                 where a.run_id = r.run_id and a.epoch = r.epoch), '[]'::jsonb) as attempts
from automation.runs r
where r.run_id = :run_id and r.project_id = :project
for update of r skip locked;

-- name: run_move_rename_steps
-- purpose: a moved run's renamed steps (:olds -> :news, partitions `old[key]` too) in what the engine reads to rebuild where it stands: attempts, row counts, partition plans, items and rows, and the log's attempt entries (completion order); :now is the move's instant
with m as (select o, n from unnest(:olds::text[], :news::text[]) as x(o, n)),
a as (
    update automation.step_attempts t
    set step_id = m.n || substr(t.step_id, length(m.o) + 1)
    from m
    where t.run_id = :run_id and (t.step_id = m.o or t.step_id like m.o || '[%]')
    returning 1),
r as (
    update automation.step_rows t set step_id = m.n from m
    where t.run_id = :run_id and t.step_id = m.o
    returning 1),
p as (
    update automation.partition_plans t set step_id = m.n from m
    where t.run_id = :run_id and t.step_id = m.o
    returning 1),
i as (
    update automation.partition_items t set step_id = m.n from m
    where t.run_id = :run_id and t.step_id = m.o
    returning 1),
rp as (
    update automation.run_partitions t set step_id = m.n, updated_at = :now::timestamptz from m
    where t.run_id = :run_id and t.step_id = m.o
    returning 1),
e as (
    update automation.run_events t
    set step_id = m.n || substr(t.step_id, length(m.o) + 1)
    from m
    where t.run_id = :run_id and t.kind = 'attempt.finished' and (t.step_id = m.o or t.step_id like m.o || '[%]')
    returning 1)
select (select count(*) from a) as attempts;

-- name: run_move_skip_step
-- purpose: record new step :step_id of run :run_id (project :project, epoch :epoch) skipped at :now: a step a migration placed before where the run stands, with addedBeforeFrontier skip
insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, started_at, finished_at,
                                      epoch, kind, project_id, error_code, error_message)
values (:run_id, :step_id, 1, :run_id || ':' || :step_id, 'skipped', :now::timestamptz, :now::timestamptz, :epoch,
        'action', :project, null, 'added before the frontier by a migration: skipped');

-- name: run_move_last_output
-- purpose: the last succeeded action attempt of step :step_id of run :run_id in epoch :epoch (its result, to recompute by a migration's outputs); :now is unused but kept for the clock rule
select attempt, result, result_ref, started_at
from automation.step_attempts
where run_id = :run_id and step_id = :step_id and epoch = :epoch and kind = 'action' and status = 'succeeded'
  and :now::timestamptz is not null
order by attempt desc
limit 1;

-- name: run_move_set_output
-- purpose: replace the result of attempt :attempt of step :step_id of run :run_id (epoch :epoch) with :result, as a migration's outputs computed it at :now
update automation.step_attempts
set result = :result::jsonb, result_ref = null, result_bytes = octet_length((:result::jsonb)::text)
where run_id = :run_id and step_id = :step_id and epoch = :epoch and kind = 'action' and attempt = :attempt
  and :now::timestamptz is not null;

-- name: run_move_version
-- purpose: move run :run_id to version :to at :now (its current step renamed by :olds -> :news) and log `run_version_changed` with :data (mapping, who, why); returns the log entry's id
with m as (select o, n from unnest(:olds::text[], :news::text[]) as x(o, n)),
u as (
    update automation.runs r
    set version = :to, updated_at = :now::timestamptz,
        current_step = coalesce((select m.n from m where m.o = r.current_step), r.current_step)
    where r.run_id = :run_id
    returning r.run_id, r.project_id, r.state)
insert into automation.run_events (run_id, project_id, at, kind, state, message, data)
select u.run_id, u.project_id, :now::timestamptz, 'run_version_changed', u.state, :message, :data::jsonb
from u
returning id;

-- name: run_move_unblock
-- purpose: a `blocked_version` run :run_id moved to a version whose code replays its history goes back to `pending`, due at :now with its divergence cleared, and the daemons are woken (a44_runs_due); returns whether it was blocked
with u as (
    update automation.runs
    set state = 'pending', next_wake_at = :now::timestamptz, updated_at = :now::timestamptz,
        error_code = null, error_message = null, failed_step = null
    where run_id = :run_id and state = 'blocked_version'
    returning run_id)
select count(*) > 0 from u
cross join lateral (select pg_notify('a44_runs_due',
                                     (extract(epoch from :now::timestamptz) * 1000)::bigint::text)) n;

-- name: upgrade_candidates
-- purpose: open runs no worker holds of workflows whose newest version in their project has `versioning: auto-upgrade`, on an older version and not yet judged for it (no run_version_kept naming it), :limit at most, at :now; read workflow first (the newest version of each, then only those workflows' runs), so a daemon's sweep every 5 s costs nothing where no workflow upgrades
with newest as (
    select distinct on (w.project_id, w.workflow_id) w.project_id, w.workflow_id, w.version
    from automation.workflow_versions w
    order by w.project_id, w.workflow_id, w.version desc
), auto as (
    select n.project_id, n.workflow_id, n.version
    from newest n
    join automation.workflow_versions w
      on w.project_id = n.project_id and w.workflow_id = n.workflow_id and w.version = n.version
    where w.ir ->> 'versioning' = 'auto-upgrade'
)
select r.run_id, r.project_id, r.workflow_id, a.version as to_version
from auto a
join automation.runs r on r.project_id = a.project_id and r.workflow_id = a.workflow_id
where r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')
  and r.lease_owner is null and r.version < a.version
  and not exists (select 1 from automation.run_events e
                  where e.run_id = r.run_id and e.kind = 'run_version_kept' and (e.data ->> 'to')::integer = a.version)
  and :now::timestamptz is not null
order by r.run_id
limit :limit;

-- name: upgrade_kept
-- purpose: log on run :run_id (project :project) at :now that auto-upgrade judged it :outcome for version :to and left it on its version (judged once per version)
insert into automation.run_events (run_id, project_id, at, kind, message, data)
values (:run_id, :project, :now::timestamptz, 'run_version_kept',
        'auto-upgrade left the run on its version: ' || :outcome::text || ' for v' || (:to::integer)::text,
        jsonb_build_object('to', :to::integer, 'class', :outcome::text));
