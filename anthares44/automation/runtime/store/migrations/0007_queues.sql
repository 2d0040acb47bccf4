-- 0007_queues: queues, per-queue / per-workflow concurrency, per-partition ordering and the dead-letter queue
-- (SPEC §10, §3 concurrency, docs/queues.md).

-- Published queue files (§10.1). Absent row = the defaults of the project's default queue (q_default):
-- concurrency 100, ordering none, no redelivery and no dead-lettering of failed runs.
create table automation.queues (
    project_id          text        not null,
    queue_id            text        not null,
    max_concurrency     integer     not null check (max_concurrency > 0),
    ordering            text        not null default 'none' check (ordering in ('none', 'by-partition')),
    max_attempts        integer     not null default 3 check (max_attempts > 0),
    dead_letter_enabled boolean     not null default true,
    max_age_ms          bigint      check (max_age_ms is null or max_age_ms > 0),
    definition          jsonb       not null,
    published_at        timestamptz not null,
    updated_at          timestamptz not null,
    constraint queues_pkey primary key (project_id, queue_id)
);

-- Ingestion order (§10.2): a sequence, not a timestamp. Existing runs are numbered in creation order.
create sequence automation.runs_seq_seq;
alter table automation.runs add column seq bigint;
update automation.runs r set seq = o.n
from (select run_id, row_number() over (order by created_at, run_id) as n from automation.runs) o
where r.run_id = o.run_id;
select setval('automation.runs_seq_seq', coalesce((select max(seq) from automation.runs), 0) + 1, false);
alter table automation.runs alter column seq set default nextval('automation.runs_seq_seq');
alter table automation.runs alter column seq set not null;
alter sequence automation.runs_seq_seq owned by automation.runs.seq;

-- Redelivery (the queue's maxAttempts): delivery n of a message; origin_run_id = its first delivery (null on the
-- first); dead_letter_id = the DLQ entry a redrive re-enqueued.
alter table automation.runs add column delivery integer not null default 1;
alter table automation.runs add column origin_run_id text;
alter table automation.runs add column dead_letter_id text;

-- The head of a partition: the unfinished run with the smallest seq of (project, queue, key).
create index runs_partition_seq_idx on automation.runs (project_id, queue, partition_key, seq)
    where partition_key is not null and state not in ('succeeded', 'failed', 'compensation_failed', 'cancelled');
-- What holds a slot: runs whose lease is held (the claim counts them, O(runs in flight)).
create index runs_leased_idx on automation.runs (project_id, queue, workflow_id)
    where lease_owner is not null;
-- queues stats: the oldest waiting message per queue
create index runs_queue_waiting_idx on automation.runs (project_id, queue, created_at)
    where state = 'pending';

-- A version's `concurrency.max` without reading the IR in the claim.
alter table automation.workflow_versions add column max_concurrency integer
    generated always as (coalesce((ir -> 'concurrency' ->> 'max')::integer, 100)) stored;

-- When a partitioned run finishes, its successor (parked by the claim until then) is due at once.
create function automation.promote_partition_next()
returns trigger
language plpgsql
as $$
begin
    if new.state in ('succeeded', 'failed', 'compensation_failed', 'cancelled')
       and old.state not in ('succeeded', 'failed', 'compensation_failed', 'cancelled') then
        update automation.runs n
        set next_wake_at = new.updated_at
        where n.run_id = (select p.run_id from automation.runs p
                          where p.project_id = new.project_id and p.queue = new.queue
                            and p.partition_key = new.partition_key and p.run_id <> new.run_id
                            and p.state not in ('succeeded', 'failed', 'compensation_failed', 'cancelled')
                          order by p.seq
                          limit 1)
          and n.state = 'pending' and n.lease_owner is null and n.next_wake_at > new.updated_at;
    end if;
    return null;
end
$$;

create trigger runs_partition_promote after update of state on automation.runs
    for each row when (new.partition_key is not null and new.queue is not null)
    execute function automation.promote_partition_next();

-- The dead-letter queue (§10.3), extending 0003's table.
alter table automation.dead_letters add column envelope_bytes bytea;      -- the envelope when it was not UTF-8
alter table automation.dead_letters add column step_id text;              -- step of the last error
alter table automation.dead_letters add column run_id text;               -- last delivery
alter table automation.dead_letters add column version integer;
alter table automation.dead_letters add column partition_key text;
alter table automation.dead_letters add column input jsonb;
alter table automation.dead_letters add column history jsonb not null default '[]'::jsonb;  -- every delivery and attempt
alter table automation.dead_letters add column redrive_of text;           -- the entry whose redrive failed again
alter table automation.dead_letters add column redriven_at timestamptz;   -- set once: an entry is redriven once
alter table automation.dead_letters add column redriven_run_id text;
create index dead_letters_queue_idx on automation.dead_letters (project_id, queue, created_at);
create index dead_letters_waiting_idx on automation.dead_letters (project_id, queue, created_at)
    where redriven_at is null;
-- the deliveries of one message (redelivery chain), for the DLQ history
create index runs_origin_idx on automation.runs (origin_run_id) where origin_run_id is not null;
