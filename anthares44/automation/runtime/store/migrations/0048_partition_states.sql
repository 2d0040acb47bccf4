-- 0048_partition_states: the partition rows a batch writes travel as one operation (issue 32): a chunk of `pass`
-- partitions (fanout.py) upserted each partition's row with its own partition_state op, one statement (and one
-- dynamic dispatch of engine_commit) each. `partition_states` upserts them in one statement, in the order given;
-- the batch never puts one partition twice in it (an upsert cannot touch a row twice in one statement).
-- Additive: partition_state (0019) stays for the daemons of schema 47 and for lone rows.

create function automation.engine_op_partition_states(op jsonb) returns void
    language sql
    as $$
    insert into automation.run_partitions as p (run_id, project_id, workflow_id, step_id, partition, ordinal, epoch,
                                                state, attempts, error_code, error_message, rows, worker_id,
                                                started_at, finished_at, updated_at)
    select run_id, project, workflow, step_id, partition, ordinal, epoch, state, attempts, error_code, error_message,
           rows::jsonb, worker_id, started_at, finished_at, "now"
    from rows from (jsonb_to_recordset(op -> 'rows')
             as (run_id text, project text, workflow text, step_id text, partition text, ordinal integer,
                 epoch integer, state text, attempts integer, error_code text, error_message text, rows text,
                 worker_id text, started_at timestamptz, finished_at timestamptz, "now" timestamptz))
         with ordinality as x(run_id, project, workflow, step_id, partition, ordinal, epoch, state, attempts,
                              error_code, error_message, rows, worker_id, started_at, finished_at, "now", n)
    order by n
    on conflict (run_id, step_id, partition) do update
        set ordinal = excluded.ordinal, epoch = excluded.epoch, state = excluded.state, attempts = excluded.attempts,
            error_code = excluded.error_code, error_message = excluded.error_message, rows = excluded.rows,
            worker_id = coalesce(excluded.worker_id, p.worker_id), started_at = excluded.started_at,
            finished_at = excluded.finished_at, updated_at = excluded.updated_at
$$;
