-- 0038_item_fanout: fan-out over up to 100,000 items (docs/partitions.md "Fan-out over items", SPEC §21). A
-- `foreach` plan's keys and items are rows of `partition_items`, written once in the transaction that plans the
-- step (never updated: an attempt's row names the partition, the item is read from here), instead of one jsonb
-- array in `partition_plans.keys` that grows with the list; `partition_plans` keeps the source and the count. The
-- partitions' pending rows are written by the same statement, in bulk. Two indexes keep the cost of an item
-- independent of their number: a run's partitions in plan order (the planner's read-back, the paged listing), and
-- the failed ones alone (what `partial`, `replay --failed-partitions` and `--state failed` ask).
create table automation.partition_items (
    run_id    text    not null references automation.runs (run_id) on delete cascade,
    step_id   text    not null,
    ordinal   integer not null,          -- position in the list (the step's results follow it)
    partition text    not null,          -- the item's key (`key:` of the item, else the item itself)
    item      jsonb,                     -- the whole item (`{{ item }}`); null when it is its key (a string)
    constraint partition_items_pkey primary key (run_id, step_id, ordinal)
);

alter table automation.partition_plans alter column keys drop not null;
alter table automation.partition_plans add column item_count integer;   -- set when the keys are partition_items

create index run_partitions_order_idx on automation.run_partitions (run_id, step_id, ordinal);
create index run_partitions_failed_idx on automation.run_partitions (run_id, step_id, ordinal)
    where state in ('failed', 'timeout');

-- The items of one `foreach` plan and their partitions' pending rows, in one statement each. `items` is a JSON
-- array of [key, item] pairs in order (item null when it is its key). A replay reads the plan back and never
-- calls this; a second call for the same step (a visit that lost its lease before committing) writes nothing.
create function automation.engine_op_partition_items(op jsonb) returns void
    language plpgsql
    as $$
declare
    x record;
begin
    select * into x from jsonb_to_record(op) as r(run_id text, project text, workflow text, step_id text,
                                                  epoch integer, items jsonb, "now" timestamptz);
    insert into automation.partition_items (run_id, step_id, ordinal, partition, item)
    select x.run_id, x.step_id, (e.n - 1)::integer, e.pair ->> 0, nullif(e.pair -> 1, 'null'::jsonb)
    from jsonb_array_elements(x.items) with ordinality as e(pair, n)
    on conflict do nothing;
    insert into automation.run_partitions (run_id, project_id, workflow_id, step_id, partition, ordinal, epoch,
                                           state, attempts, updated_at)
    select x.run_id, x.project, x.workflow, x.step_id, e.pair ->> 0, (e.n - 1)::integer, x.epoch, 'pending', 0,
           x."now"
    from jsonb_array_elements(x.items) with ordinality as e(pair, n)
    on conflict (run_id, step_id, partition) do nothing;
    update automation.partition_plans set item_count = jsonb_array_length(x.items)
    where run_id = x.run_id and step_id = x.step_id and keys is null;
end
$$;

-- A replay's new epoch takes over the partitions it reuses (success, skipped) in one statement per step; those it
-- runs again are rewritten by their own attempts' `partition_state`.
create function automation.engine_op_partition_epoch(op jsonb) returns void
    language sql
    as $$
    update automation.run_partitions p set epoch = x.epoch, updated_at = x."now"
    from jsonb_to_record(op) as x(run_id text, step_id text, epoch integer, "now" timestamptz)
    where p.run_id = x.run_id and p.step_id = x.step_id and p.epoch < x.epoch and p.state in ('success', 'skipped')
$$;
