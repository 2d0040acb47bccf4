-- 0020_partition_plans: a fan-out step's partition list is decided once, at the step's first visit, and recorded
-- here in the same `engine_commit` as the partitions' pending rows; every later visit, a takeover after a crash
-- and a replay read it back instead of evaluating the source again (docs/partitions.md, "The plan"). For a
-- `since: lastSuccess` range the operation also takes the (workflow, step) lock and refuses a plan that takes a
-- partition another run already processed or still owns (A44PC: the engine plans again), so two runs of the same
-- workflow never take the same days.
create table automation.partition_plans (
    run_id      text        not null references automation.runs (run_id) on delete cascade,
    step_id     text        not null,
    project_id  text        not null,
    workflow_id text        not null,
    source      text        not null,          -- the step's partition source as planned (its IR, canonical JSON)
    keys        jsonb       not null,          -- the partition keys, in order
    epoch       integer     not null,          -- the epoch that planned it
    planned_at  timestamptz not null,
    constraint partition_plans_pkey primary key (run_id, step_id)
);

-- Record the plan of one fan-out step; `exclusive` (a since-last-success range) first serializes planners of the
-- same workflow step and refuses keys done or owned by another run.
create function automation.engine_op_partition_plan(op jsonb) returns void
    language plpgsql
    as $$
declare
    x record;
    taken text;
begin
    select * into x from jsonb_to_record(op) as r(run_id text, project text, workflow text, step_id text,
                                                  source text, keys jsonb, epoch integer, exclusive boolean,
                                                  "now" timestamptz);
    if x.exclusive then
        perform pg_advisory_xact_lock(hashtextextended('a44.partition_plan/' || x.project || '/' || x.workflow
                                                       || '/' || x.step_id, 0));
        -- a new statement: sees what planners that held the lock before us committed
        select p.partition into taken
        from automation.run_partitions p
        join automation.runs r on r.run_id = p.run_id
        where p.project_id = x.project and p.workflow_id = x.workflow and p.step_id = x.step_id
          and p.run_id <> x.run_id
          and p.partition in (select jsonb_array_elements_text(x.keys))
          and (p.state in ('success', 'skipped')
               or r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled'))
        limit 1;
        if taken is not null then
            raise exception using errcode = 'A44PC',
                message = format('partition %s of step %s is taken by another run', taken, x.step_id);
        end if;
    end if;
    insert into automation.partition_plans (run_id, step_id, project_id, workflow_id, source, keys, epoch,
                                            planned_at)
    values (x.run_id, x.step_id, x.project, x.workflow, x.source, x.keys, x.epoch, x."now")
    on conflict (run_id, step_id) do nothing;
end
$$;

-- what a since-last-success plan reads: every partition of one workflow step, across runs
create index run_partitions_step_idx on automation.run_partitions (project_id, workflow_id, step_id, partition);
