-- The scheduler (§11, docs/schedules.md): occurrences of schedule triggers, decided once under a unique key.

-- name: schedule_triggers_active
-- purpose: every active schedule trigger (all projects) with its IR and first publication
select project_id, trigger_id, workflow_id, ir, published_at
from automation.triggers
where type = 'schedule' and active
order by project_id, trigger_id;

-- name: schedule_trigger_lock
-- purpose: serialise the decisions about one trigger across schedulers for the rest of the transaction
select pg_advisory_xact_lock(hashtext('a44.schedule:' || :project::text || ':' || :trigger_id::text));

-- name: schedule_cursor
-- purpose: the latest occurrence of a trigger already decided (occurrences after it are still to decide)
select max(fire_at) from automation.schedule_occurrences where project_id = :project and trigger_id = :trigger_id;

-- name: schedule_trigger_busy
-- purpose: whether a run of the trigger is unfinished, or an occurrence started and its run is being created
select exists (select 1 from automation.runs
               where project_id = :project and trigger_id = :trigger_id
                 and state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled'))
    or exists (select 1 from automation.schedule_occurrences
               where project_id = :project and trigger_id = :trigger_id and status = 'started' and run_id is null);

-- name: schedule_queued_expire
-- purpose: queued occurrences of a trigger that waited past their expiry become expired
update automation.schedule_occurrences
set status = 'expired', updated_at = :now
where project_id = :project and trigger_id = :trigger_id and status = 'queued' and expires_at <= :now
returning occurrence_key, fire_at;

-- name: schedule_queued_start_next
-- purpose: the oldest queued occurrence of a trigger moves to started (its run is created right after)
update automation.schedule_occurrences o
set status = 'started', updated_at = :now
where (o.project_id, o.occurrence_key) = (
    select project_id, occurrence_key from automation.schedule_occurrences
    where project_id = :project and trigger_id = :trigger_id and status = 'queued'
    order by fire_at limit 1)
  and o.status = 'queued'
returning o.occurrence_key, o.fire_at;

-- name: schedule_occurrences_insert
-- purpose: record decided occurrences; a key already recorded (another scheduler won it) is left alone and not returned
insert into automation.schedule_occurrences as o (project_id, trigger_id, occurrence_key, fire_at, status, catch_up,
                                                  expires_at, created_at, updated_at)
select :project, :trigger_id, k, f, s, c, e, :now, :now
from unnest(:keys::text[], :instants::timestamptz[], :statuses::text[], :catch_ups::boolean[], :expires::timestamptz[]) as u(k, f, s, c, e)
on conflict (project_id, occurrence_key) do nothing
returning o.occurrence_key, o.status;

-- name: schedule_runs_to_create
-- purpose: started occurrences whose run is not recorded yet, created before :now, with what the run needs
select o.project_id, o.trigger_id, o.occurrence_key, o.fire_at, o.created_at, t.workflow_id, t.ir
from automation.schedule_occurrences o
join automation.triggers t on t.project_id = o.project_id and t.trigger_id = o.trigger_id
where o.status = 'started' and o.run_id is null and o.created_at <= :now
order by o.fire_at
limit 500;

-- name: schedule_occurrence_set_run
-- purpose: record the run of a started occurrence
update automation.schedule_occurrences
set run_id = :run_id, updated_at = :now
where project_id = :project_id and occurrence_key = :key and status = 'started' and run_id is null;

-- name: schedule_occurrence_fail
-- purpose: a started occurrence whose run cannot be created (workflow not published) is recorded missed, with why
update automation.schedule_occurrences
set status = 'missed', error_code = :code, updated_at = :now
where project_id = :project_id and occurrence_key = :key and status = 'started' and run_id is null;

-- name: schedule_occurrences_list
-- purpose: the occurrences of a project, optionally of one trigger, oldest first
select project_id, trigger_id, occurrence_key, fire_at, status, run_id, catch_up, expires_at, error_code,
       created_at, updated_at
from automation.schedule_occurrences
where project_id = :project and (:trigger_id::text is null or trigger_id = :trigger_id)
order by fire_at, occurrence_key
limit :limit;

-- name: schedule_next_expiry
-- purpose: the earliest expiry of a queued occurrence (the scheduler wakes for it)
select min(expires_at) from automation.schedule_occurrences where status = 'queued';
