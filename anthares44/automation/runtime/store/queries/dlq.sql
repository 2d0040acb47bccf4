-- The dead-letter queue (§10.3, §10.4, docs/queues.md).

-- name: dlq_insert
-- purpose: dead-letter an envelope that never became a run (E_ENVELOPE_INVALID, E_EVENT_TOO_OLD), byte for byte (:envelope_bytes bytea when it is not UTF-8), linked to the entry :redrive_of it was redriven from
insert into automation.dead_letters (dead_letter_id, project_id, queue, trigger_id, workflow_id, event_id, envelope,
                                     envelope_bytes, error_code, error_message, attempts, created_at, redrive_of,
                                     history)
values (:dead_letter_id, :project, :queue, :trigger_id, :workflow_id, :event_id, :envelope, :envelope_bytes, :error_code, :error_message, :attempts, :now, :redrive_of,
        coalesce((select history from automation.dead_letters where dead_letter_id = :redrive_of), '[]'::jsonb));

-- name: dlq_list
-- purpose: a project's dead letters newest first, only those of queue :queue when it is given
select dead_letter_id, project_id, queue, trigger_id, workflow_id, event_id, envelope, error_code, error_message,
       attempts, created_at, redriven_at
from automation.dead_letters
where project_id = :project and (:queue::text is null or queue = :queue)
order by created_at desc, dead_letter_id desc
limit :limit;

-- name: dlq_stats
-- purpose: dead letters of queue :queue created since :start, grouped by error code with first/last seen and how many wait (not redriven)
select error_code, count(*) as count, count(*) filter (where redriven_at is null) as waiting,
       min(created_at) as first_seen, max(created_at) as last_seen
from automation.dead_letters
where project_id = :project and queue = :queue and created_at >= :start
group by error_code
order by count(*) desc, error_code;

-- name: dlq_get
-- purpose: one dead letter with everything kept
select * from automation.dead_letters where dead_letter_id = :dead_letter_id and project_id = :project;

-- name: dlq_page
-- purpose: dead letters of queue :queue not redriven yet, oldest first, after (:after_at, :after_id), :limit at most (redrive scans with it)
select * from automation.dead_letters
where project_id = :project and queue = :queue and redriven_at is null and (created_at, dead_letter_id) > (:after_at, :after_id)
order by created_at, dead_letter_id
limit :limit;

-- name: dlq_mark_redriven
-- purpose: mark entry :dead_letter_id redriven at :now by run :run_id, once (no row: another redrive took it)
update automation.dead_letters
set redriven_at = :now, redriven_run_id = :run_id
where dead_letter_id = :dead_letter_id and redriven_at is null
returning dead_letter_id;

-- name: dlq_link_run
-- purpose: a redriven run remembers its DLQ entry (a later failure carries the entry's history)
update automation.runs set dead_letter_id = :dead_letter_id where run_id = :run_id and dead_letter_id is null;

-- name: dlq_queue_known
-- purpose: does queue :queue exist for project :project (published, the default, or named by a dead letter)
select :queue = 'q_default'
    or exists (select 1 from automation.queues where project_id = :project and queue_id = :queue)
    or exists (select 1 from automation.dead_letters where project_id = :project and queue = :queue);

-- name: dlq_workflow_queue
-- purpose: the queue of a workflow's latest version
select coalesce(ir ->> 'queue', 'q_default') as queue, version
from automation.workflow_versions where project_id = :project and workflow_id = :workflow_id
order by version desc limit 1;
