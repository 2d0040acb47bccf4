-- Queues (§10.1): published queue files and their gauges (docs/queues.md).

-- name: queue_upsert
-- purpose: store a published queue (replacing its previous definition); returns whether it was created, updated or unchanged
with old as (
    select definition from automation.queues where project_id = :project and queue_id = :queue_id
), up as (
    insert into automation.queues as q (project_id, queue_id, max_concurrency, ordering, max_attempts,
                                        dead_letter_enabled, max_age_ms, definition, published_at, updated_at)
    values (:project, :queue_id, :max_concurrency, :ordering, :max_attempts, :dead_letter, :max_age, :definition::jsonb, :now, :now)
    on conflict (project_id, queue_id) do update
        set max_concurrency = excluded.max_concurrency, ordering = excluded.ordering,
            max_attempts = excluded.max_attempts, dead_letter_enabled = excluded.dead_letter_enabled,
            max_age_ms = excluded.max_age_ms, definition = excluded.definition, updated_at = excluded.updated_at
        where q.definition is distinct from excluded.definition
    returning queue_id
)
select case when not exists (select 1 from old) then 'created'
            when exists (select 1 from up) then 'updated' else 'unchanged' end;

-- name: queues_stats
-- purpose: per queue of a project (published ones, q_default, and any named by a run): limits, runs in flight (leased), waiting (pending), age of the oldest waiting message at :now, DLQ depth (not redriven)
with names as (
    select queue_id as queue from automation.queues where project_id = :project
    union select 'q_default'
    union select distinct queue from automation.runs where project_id = :project and state = 'pending' and queue is not null
    union select distinct queue from automation.dead_letters where project_id = :project and queue is not null
)
select n.queue,
       coalesce(q.max_concurrency, 100) as max_concurrency, coalesce(q.ordering, 'none') as ordering,
       coalesce(q.max_attempts, 1) as max_attempts, q.max_age_ms, q.queue_id is not null as published,
       (select count(*) from automation.runs r
         where r.project_id = :project and coalesce(r.queue, 'q_default') = n.queue and r.lease_owner is not null) as in_flight,
       (select count(*) from automation.runs r
         where r.project_id = :project and coalesce(r.queue, 'q_default') = n.queue and r.state = 'pending') as waiting,
       (select extract(epoch from :now - min(r.created_at)) from automation.runs r
         where r.project_id = :project and coalesce(r.queue, 'q_default') = n.queue and r.state = 'pending') as oldest_waiting_age_s,
       (select count(*) from automation.dead_letters d
         where d.project_id = :project and d.queue = n.queue and d.redriven_at is null) as dlq_depth
from names n
left join automation.queues q on q.project_id = :project and q.queue_id = n.queue
order by n.queue;
