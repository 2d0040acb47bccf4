-- 0019_engine_ops: the row counts (0014) and partition states (0015) a step transition writes, as operations of
-- `engine_commit` (0018), so they commit in the transition's one statement with the attempt they follow.

-- Record (or replace, on a retry or a replay) the row counts a step or partition ('' = the whole step) reported.
create function automation.engine_op_step_rows_record(op jsonb) returns void
    language sql
    as $$
    insert into automation.step_rows (run_id, step_id, partition, epoch, rows_in, rows_out, rows_error, recorded_at)
    select run_id, step_id, partition, epoch, rows_in, rows_out, rows_error, "now"
    from jsonb_to_record(op) as x(run_id text, step_id text, partition text, epoch integer, rows_in bigint,
                                  rows_out bigint, rows_error bigint, "now" timestamptz)
    on conflict (run_id, step_id, partition) do update
    set epoch = excluded.epoch, rows_in = excluded.rows_in, rows_out = excluded.rows_out,
        rows_error = excluded.rows_error, recorded_at = excluded.recorded_at
$$;

-- Upsert a partition's state as of the operation's epoch, keeping who skipped it and why.
create function automation.engine_op_partition_state(op jsonb) returns void
    language sql
    as $$
    insert into automation.run_partitions as p (run_id, project_id, workflow_id, step_id, partition, ordinal, epoch,
                                                state, attempts, error_code, error_message, rows, worker_id,
                                                started_at, finished_at, updated_at)
    select run_id, project, workflow, step_id, partition, ordinal, epoch, state, attempts, error_code, error_message,
           rows::jsonb, worker_id, started_at, finished_at, "now"
    from jsonb_to_record(op) as x(run_id text, project text, workflow text, step_id text, partition text,
                                  ordinal integer, epoch integer, state text, attempts integer, error_code text,
                                  error_message text, rows text, worker_id text, started_at timestamptz,
                                  finished_at timestamptz, "now" timestamptz)
    on conflict (run_id, step_id, partition) do update
        set ordinal = excluded.ordinal, epoch = excluded.epoch, state = excluded.state, attempts = excluded.attempts,
            error_code = excluded.error_code, error_message = excluded.error_message, rows = excluded.rows,
            worker_id = coalesce(excluded.worker_id, p.worker_id), started_at = excluded.started_at,
            finished_at = excluded.finished_at, updated_at = excluded.updated_at
$$;
