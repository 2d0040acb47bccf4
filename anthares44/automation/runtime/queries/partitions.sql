-- Partitions of fan-out steps (docs/partitions.md): the interpreter mirrors each partition's state into
-- run_partitions with the attempt it follows; `partitions`, the REST API and `runs skip` read and change it.

-- name: partition_state
-- purpose: upsert the state of partition :partition of step :step_id in run :run_id as of epoch :epoch (keeps who skipped it and why)
insert into automation.run_partitions as p (run_id, project_id, workflow_id, step_id, partition, ordinal, epoch,
                                            state, attempts, error_code, error_message, rows, worker_id,
                                            started_at, finished_at, updated_at)
values (:run_id, :project, :workflow, :step_id, :partition, :ordinal, :epoch, :state, :attempts, :error_code,
        :error_message, :rows::jsonb, :worker_id, :started_at, :finished_at, :now)
on conflict (run_id, step_id, partition) do update
    set ordinal = excluded.ordinal, epoch = excluded.epoch, state = excluded.state, attempts = excluded.attempts,
        error_code = excluded.error_code, error_message = excluded.error_message, rows = excluded.rows,
        worker_id = coalesce(excluded.worker_id, p.worker_id), started_at = excluded.started_at,
        finished_at = excluded.finished_at, updated_at = excluded.updated_at;

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
