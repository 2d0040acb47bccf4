-- 0015_partitions: partitioned work (docs/partitions.md). A fan-out step runs its call once per partition; each
-- partition's attempts are ordinary step_attempts rows whose step_id is `step[partition]`, and `run_partitions`
-- keeps one row per (run, step, partition) with its current state, written in the same transaction as the attempt
-- it follows (what `a44 automation partitions` and the REST API read). A run some of whose partitions failed for
-- good, on a step that accepts it, ends `partial`: finished like the other final states, except that a person who
-- skips the last failed partition completes it as `succeeded`.
alter table automation.runs drop constraint runs_state_check;
alter table automation.runs add constraint runs_state_check check (state in ('pending', 'running', 'waiting',
    'sleeping', 'awaiting_confirmation', 'compensating', 'succeeded', 'partial', 'failed', 'compensation_failed',
    'cancelled'));

-- the indexes and the trigger that pick unfinished runs count `partial` as finished
drop index automation.runs_partition_idx;
create index runs_partition_idx on automation.runs (project_id, queue, partition_key, created_at)
    where state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled');
drop index automation.runs_trigger_active_idx;
create index runs_trigger_active_idx on automation.runs (project_id, trigger_id)
    where trigger_id is not null and state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled');
drop index automation.runs_partition_seq_idx;
create index runs_partition_seq_idx on automation.runs (project_id, queue, partition_key, seq)
    where partition_key is not null
      and state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled');

create or replace function automation.promote_partition_next()
returns trigger
language plpgsql
as $$
begin
    if new.state in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')
       and old.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled') then
        update automation.runs n
        set next_wake_at = new.updated_at
        where n.run_id = (select p.run_id from automation.runs p
                          where p.project_id = new.project_id and p.queue = new.queue
                            and p.partition_key = new.partition_key and p.run_id <> new.run_id
                            and p.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')
                          order by p.seq
                          limit 1)
          and n.state = 'pending' and n.lease_owner is null and n.next_wake_at > new.updated_at;
    end if;
    return null;
end
$$;

create table automation.run_partitions (
    run_id        text        not null references automation.runs (run_id) on delete cascade,
    project_id    text        not null,
    workflow_id   text        not null,
    step_id       text        not null,
    partition     text        not null,
    ordinal       integer     not null,          -- position in the step's partition list (results follow it)
    epoch         integer     not null,          -- the run epoch that last wrote the row (a rerun is a new epoch)
    state         text        not null check (state in ('pending', 'running', 'success', 'failed', 'retrying',
                                                        'skipped', 'timeout')),
    attempts      integer     not null default 0,
    error_code    text,
    error_message text,
    rows          jsonb,                         -- the result's `rows` ({in, out, error}) when it reports one
    worker_id     text,                          -- the daemon that ran the last attempt
    skipped_by    text,                          -- who skipped it (a person), with skip_reason
    skip_reason   text,
    started_at    timestamptz,
    finished_at   timestamptz,
    updated_at    timestamptz not null,
    constraint run_partitions_pkey primary key (run_id, step_id, partition)
);
-- "was partition P of workflow W processed, when, by which run": newest first
create index run_partitions_workflow_idx on automation.run_partitions (project_id, workflow_id, partition,
                                                                        updated_at desc);
