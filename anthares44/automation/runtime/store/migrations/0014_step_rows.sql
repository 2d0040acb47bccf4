-- 0014_step_rows: the row counts each step reported (§16, docs/rows.md): rows in, out and in error, written in the
-- transaction that finishes the step's attempt, so a run's summary adds up what the steps really recorded (a code
-- step's body does not run again on replay, its counts are read back from here). Keyed by step and partition:
-- `partition` is '' for a step as a whole; a partitioned step records one row per partition key, and the summary
-- adds a step's partitions first, then the steps (docs/rows.md "Partitions").
create table automation.step_rows (
    run_id      text        not null,
    step_id     text        not null,
    partition   text        not null default '',
    epoch       integer     not null,
    rows_in     bigint      check (rows_in >= 0),
    rows_out    bigint      check (rows_out >= 0),
    rows_error  bigint      check (rows_error >= 0),
    recorded_at timestamptz not null,
    constraint step_rows_pkey primary key (run_id, step_id, partition),
    constraint step_rows_run_fkey foreign key (run_id) references automation.runs (run_id) on delete cascade
);
