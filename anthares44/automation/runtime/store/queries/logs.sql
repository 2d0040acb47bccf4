-- Log queries over step attempts (docs/observability.md "Log queries") and their retention.

-- name: logs_custom_plans
-- purpose: plan this transaction's statements for their actual parameters, so an unused filter drops out and the index of a used one applies
set local plan_cache_mode = force_custom_plan;

-- name: logs_query
-- purpose: attempts of a project in [since, until) matching the optional filters, newest first, after an optional keyset cursor, at most :limit rows
select a.run_id, a.step_id, a.attempt, a.epoch, a.kind, a.status, a.error_code, a.error_message, a.started_at,
       a.finished_at, a.worker_id, r.workflow_id, r.version, r.partition_key, r.queue
from automation.step_attempts a
join automation.runs r on r.run_id = a.run_id
where a.project_id = :project and r.project_id = :project
  and a.started_at >= :since and a.started_at < :until
  and (:error_code::text is null or a.error_code = :error_code)
  and (:step::text is null or a.step_id = :step)
  and (:workflow::text is null or r.workflow_id = :workflow)
  and (:partition_key::text is null or r.partition_key = :partition_key)
  and (:after_at::timestamptz is null or a.started_at <= :after_at)   -- the index bound of the cursor
  and (:after_at::timestamptz is null
       or a.started_at < :after_at
       or (a.started_at = :after_at
           and (a.run_id, a.step_id, a.epoch, a.kind, a.attempt) < (:after_run, :after_step, :after_epoch, :after_kind, :after_attempt)))
order by a.started_at desc, a.run_id desc, a.step_id desc, a.epoch desc, a.kind desc, a.attempt desc
limit :limit;

-- name: logs_retention_try_lock
-- purpose: take the retention's session advisory lock if free, so one daemon (or `logs archive`) runs retention at a time
select pg_try_advisory_lock(hashtext('a44.automation.log_retention'));

-- name: logs_retention_unlock
-- purpose: release the retention's session advisory lock
select pg_advisory_unlock(hashtext('a44.automation.log_retention'));

-- name: logs_days_to_archive
-- purpose: UTC days before :cutoff whose attempts are not in the archive with their current count, oldest first
select day, rows from (
    select (a.started_at at time zone 'UTC')::date as day, count(*) as rows
    from automation.step_attempts a
    where a.started_at < :cutoff
    group by 1
    except
    select day, rows from automation.log_archive_days
) d
order by day;

-- name: logs_day_rows
-- purpose: every attempt that started in [lo, hi) with its run's workflow, version, partition key and queue, as the archive stores them
select a.project_id, a.run_id, a.step_id, a.attempt, a.epoch, a.kind, a.status, a.error_code, a.error_message,
       a.started_at, a.finished_at, a.worker_id, r.workflow_id, r.version, r.partition_key, r.queue
from automation.step_attempts a
left join automation.runs r on r.run_id = a.run_id
where a.started_at >= :lo and a.started_at < :hi;

-- name: logs_day_record
-- purpose: record that the archive's file for :day holds :rows rows (a rewrite of the day replaces the record)
insert into automation.log_archive_days (day, rows, path, archived_at)
values (:day, :rows, :path, :now)
on conflict (day) do update set rows = excluded.rows, path = excluded.path, archived_at = excluded.archived_at;

-- name: logs_archive_day_forget
-- purpose: forget the archive's record of days before :before (their files are deleted by cold retention)
delete from automation.log_archive_days where day < :before;

-- name: logs_month_drop
-- purpose: detach and drop a month partition of step_attempts if the archive holds all of its rows; the rows dropped or null
select automation.drop_archived_attempt_month(:name, :lo, :hi);

-- name: logs_runs_delete
-- purpose: delete at most :batch terminal runs that ended before :before, oldest first, with their events, idempotency keys and trace context; the runs deleted
with doomed as (
    select run_id, project_id, idempotency_key
    from automation.runs
    where finished_at < :before
      and state in ('succeeded', 'failed', 'compensation_failed', 'cancelled')
    order by finished_at
    limit :batch
), events as (
    delete from automation.run_events e using doomed d where e.run_id = d.run_id
), keys as (
    delete from automation.idempotency_keys k using doomed d
    where k.project_id = d.project_id and k.key = d.idempotency_key and k.run_id = d.run_id
), traces as (
    delete from automation.run_trace_context t using doomed d
    where t.project_id = d.project_id and t.run_key = d.idempotency_key and t.at < :before
)
delete from automation.runs r using doomed d where r.run_id = d.run_id
returning r.run_id;
