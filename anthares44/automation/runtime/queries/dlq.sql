-- The dead-letter queue (§10.3, §10.4, docs/queues.md).

-- name: dlq_insert
-- purpose: dead-letter an envelope that never became a run (E_ENVELOPE_INVALID, E_EVENT_TOO_OLD), byte for byte ($8 bytea when it is not UTF-8), linked to the entry $13 it was redriven from
insert into automation.dead_letters (dead_letter_id, project_id, queue, trigger_id, workflow_id, event_id, envelope,
                                     envelope_bytes, error_code, error_message, attempts, created_at, redrive_of,
                                     history)
values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
        coalesce((select history from automation.dead_letters where dead_letter_id = $13), '[]'::jsonb));

-- name: dlq_list
-- purpose: a project's dead letters newest first, only those of queue $2 when it is given
select dead_letter_id, project_id, queue, trigger_id, workflow_id, event_id, envelope, error_code, error_message,
       attempts, created_at, redriven_at
from automation.dead_letters
where project_id = $1 and ($2::text is null or queue = $2)
order by created_at desc, dead_letter_id desc
limit $3;

-- name: dlq_stats
-- purpose: dead letters of queue $2 created since $3, grouped by error code with first/last seen and how many wait (not redriven)
select error_code, count(*) as count, count(*) filter (where redriven_at is null) as waiting,
       min(created_at) as first_seen, max(created_at) as last_seen
from automation.dead_letters
where project_id = $1 and queue = $2 and created_at >= $3
group by error_code
order by count(*) desc, error_code;

-- name: dlq_get
-- purpose: one dead letter with everything kept
select * from automation.dead_letters where dead_letter_id = $1 and project_id = $2;

-- name: dlq_page
-- purpose: dead letters of queue $2 not redriven yet, oldest first, after ($3, $4), $5 at most (redrive scans with it)
select * from automation.dead_letters
where project_id = $1 and queue = $2 and redriven_at is null and (created_at, dead_letter_id) > ($3, $4)
order by created_at, dead_letter_id
limit $5;

-- name: dlq_mark_redriven
-- purpose: mark entry $1 redriven at $2 by run $3, once (no row: another redrive took it)
update automation.dead_letters
set redriven_at = $2, redriven_run_id = $3
where dead_letter_id = $1 and redriven_at is null
returning dead_letter_id;

-- name: dlq_link_run
-- purpose: a redriven run remembers its DLQ entry (a later failure carries the entry's history)
update automation.runs set dead_letter_id = $2 where run_id = $1 and dead_letter_id is null;

-- name: dlq_queue_known
-- purpose: does queue $2 exist for project $1 (published, the default, or named by a dead letter)
select $2 = 'q_default'
    or exists (select 1 from automation.queues where project_id = $1 and queue_id = $2)
    or exists (select 1 from automation.dead_letters where project_id = $1 and queue = $2);

-- name: dlq_workflow_queue
-- purpose: the queue of a workflow's latest version
select coalesce(ir ->> 'queue', 'q_default') as queue, version
from automation.workflow_versions where project_id = $1 and workflow_id = $2
order by version desc limit 1;
