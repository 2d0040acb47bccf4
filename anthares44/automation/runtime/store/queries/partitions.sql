-- Partitions of fan-out steps (docs/partitions.md): the interpreter mirrors each partition's state into
-- run_partitions with the attempt it follows (the `partition_state` operation of engine_commit, migration
-- 0019); `partitions`, the REST API and `runs skip` read and change it.

-- name: partition_list
-- purpose: partitions of project :project for run :run_id or workflow :workflow (newest run first), optionally only state :state, partition :partition, step :step, at most :limit rows
select p.run_id, p.workflow_id, p.step_id, p.partition, p.ordinal, p.epoch, p.state, p.attempts, p.error_code,
       p.error_message, p.rows, p.worker_id, p.skipped_by, p.skip_reason, p.started_at, p.finished_at,
       p.updated_at, r.state as run_state
from automation.run_partitions p
join automation.runs r on r.run_id = p.run_id
where p.project_id = :project
  and (:run_id::text is null or p.run_id = :run_id)
  and (:workflow::text is null or p.workflow_id = :workflow)
  and (:state::text is null or p.state = :state)
  and (:partition::text is null or p.partition = :partition)
  and (:step::text is null or p.step_id = :step)
order by r.created_at desc, p.run_id, p.step_id, p.ordinal
limit :limit;
-- name: skip_lock_run
-- purpose: lock run :run_id of project :project for a person's skip: its state, epoch and workflow
select run_id, project_id, workflow_id, state, epoch, version
from automation.runs
where run_id = :run_id and project_id = :project
for update;

-- name: skip_last_attempt
-- purpose: the last action attempt of :step_id (a step, or a partition's `step[partition]`) in epoch :epoch of run :run_id
select attempt, status, retry_at, error_code
from automation.step_attempts
where run_id = :run_id and epoch = :epoch and step_id = :step_id and kind = 'action'
order by attempt desc
limit 1;

-- name: skip_partition
-- purpose: mark partition :partition of step :step_id of run :run_id skipped by :who for :reason at :now
update automation.run_partitions
set state = 'skipped', skipped_by = :who, skip_reason = :reason, updated_at = :now
where run_id = :run_id and step_id = :step_id and partition = :partition
returning state;

-- name: skip_failed_left
-- purpose: how many partitions of run :run_id are still failed or timed out
select count(*) from automation.run_partitions
where run_id = :run_id and state in ('failed', 'timeout');

-- name: skip_complete_run
-- purpose: a partial run of which a person skipped the last failed partition becomes succeeded at :now (its finished_at: the skip ended it), logging run.state
with r as (
    update automation.runs
    set state = 'succeeded', error_code = null, error_message = null, failed_step = null, current_step = null,
        updated_at = :now, finished_at = :now
    where run_id = :run_id and state = 'partial'
    returning run_id, project_id
)
insert into automation.run_events (run_id, project_id, at, kind, state, data)
select run_id, project_id, :now, 'run.state', 'succeeded', jsonb_build_object('from', 'partial', 'by', :who::text)
from r
returning id;

-- name: partition_history
-- purpose: each partition of step :step of workflow :workflow (project :project) in runs other than :run_id: whether one processed it (success, or skipped by a person: not for a conflict with another run) and whether an unfinished one owns it
select p.partition,
       bool_or(p.state = 'success' or (p.state = 'skipped' and coalesce(p.skipped_by, '') not like 'run:%')) as done,
       bool_or(r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')) as owned
from automation.run_partitions p
join automation.runs r on r.run_id = p.run_id
where p.project_id = :project and p.workflow_id = :workflow and p.step_id = :step and p.run_id <> :run_id
group by p.partition;

-- name: partition_plans_of_run
-- purpose: the recorded partition plans of run :run_id (one per fan-out step), to read back instead of planning again
select step_id, source, keys, epoch
from automation.partition_plans
where run_id = :run_id;

-- name: partition_items_of_run
-- purpose: the keys and items of the `foreach` plans of run :run_id (migration 0038), in plan order per step
select step_id, partition, item
from automation.partition_items
where run_id = :run_id
order by step_id, ordinal;

-- name: partition_page
-- purpose: a page of the partitions of run :run_id (project :project) in plan order after cursor (:after_step, :after_ordinal), optionally only state :state, partition :partition, step :step, at most :limit rows
select p.run_id, p.workflow_id, p.step_id, p.partition, p.ordinal, p.epoch, p.state, p.attempts, p.error_code,
       p.error_message, p.rows, p.worker_id, p.skipped_by, p.skip_reason, p.started_at, p.finished_at,
       p.updated_at, r.state as run_state
from automation.run_partitions p
join automation.runs r on r.run_id = p.run_id
where p.run_id = :run_id and p.project_id = :project
  and (p.step_id, p.ordinal) > (coalesce(:after_step::text, ''), coalesce(:after_ordinal::integer, -1))
  and (:state::text is null or p.state = :state)
  and (:partition::text is null or p.partition = :partition)
  and (:step::text is null or p.step_id = :step)
order by p.step_id, p.ordinal
limit :limit;

-- name: partition_failed_page
-- purpose: a page of the partitions of run :run_id (project :project) that failed for good (state :state, or both failed and timeout when null), in plan order after cursor (:after_step, :after_ordinal), at most :limit: by the partial index run_partitions_failed_idx, the cost follows the failed ones, not the run's size
select p.run_id, p.workflow_id, p.step_id, p.partition, p.ordinal, p.epoch, p.state, p.attempts, p.error_code,
       p.error_message, p.rows, p.worker_id, p.skipped_by, p.skip_reason, p.started_at, p.finished_at,
       p.updated_at, r.state as run_state
from automation.run_partitions p
join automation.runs r on r.run_id = p.run_id
where p.run_id = :run_id and p.project_id = :project and p.state in ('failed', 'timeout')
  and (p.step_id, p.ordinal) > (coalesce(:after_step::text, ''), coalesce(:after_ordinal::integer, -1))
  and (:state::text is null or p.state = :state)
  and (:partition::text is null or p.partition = :partition)
  and (:step::text is null or p.step_id = :step)
order by p.step_id, p.ordinal
limit :limit;

-- name: partition_totals_of_run
-- purpose: how many partitions run :run_id has (its plans' counts: no scan of its partitions) and how many of them failed for good (the partial index)
select coalesce((select sum(coalesce(pl.item_count, jsonb_array_length(pl.keys)))
                 from automation.partition_plans pl where pl.run_id = :run_id), 0)::bigint as total,
       (select count(*) from automation.run_partitions f
        where f.run_id = :run_id and f.state in ('failed', 'timeout'))::bigint as failed;

-- name: partition_logical_time
-- purpose: the occurrence of schedule :trigger (project :project) that started run :run_id, if one did (its logical time)
select fire_at
from automation.schedule_occurrences
where project_id = :project and trigger_id = :trigger and run_id = :run_id
order by fire_at
limit 1;

-- name: partition_locks_held
-- purpose: which of partitions :keys of step :step (workflow :workflow, project :project) another unfinished run than :run_id holds a lock on, one row (partition, holder) each; a run whose partitions run inline (no effect, ended in the transaction that records them) looks instead of taking, and takes only these (partition_locks_take: waited for, skipped, or a stale one taken over)
select l.partition, l.run_id as holder
from automation.partition_locks l
join automation.runs r on r.run_id = l.run_id
where l.project_id = :project and l.workflow_id = :workflow and l.step_id = :step
  and l.partition = any(:keys::text[]) and l.run_id <> :run_id
  and r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled');

-- name: partition_locks_take
-- purpose: take the locks of partitions :keys of step :step (workflow :workflow, project :project) for run :run_id, never waiting for a row another transaction has locked (0046); one row (partition, holder) per key another unfinished run holds or is releasing; with :wait the run is woken when such a key frees
select partition, holder
from automation.partition_locks_take_v2(:project, :workflow, :step, :run_id, :keys::text[], :wait, :now);
