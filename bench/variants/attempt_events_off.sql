-- Bench variant (not a migration): the step attempts' log events are not written. engine_op_attempt_start inserts
-- only the attempt row, engine_attempt_finished (attempt finish and record) writes nothing. The log, --follow, the
-- console and compensation order are then wrong: for measuring what the events cost, never for a real database.
--
--   .venv/bin/python bench/bench_runtime_ab.py --functions \
--       A44_BENCH_SQL=schema:engine_attempt_finished,engine_op_attempt_start \
--       A44_BENCH_SQL=bench/variants/attempt_events_off.sql
create or replace function automation.engine_attempt_finished(a automation.step_attempts) returns bigint
language plpgsql as $$ begin return 0; end $$;
create or replace function automation.engine_op_attempt_start(op jsonb) returns bigint
language plpgsql as $$
begin
    insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, started_at, epoch,
                                          kind, project_id, worker_id, lease_grant)
    select run_id, step_id, attempt, key, 'running', started_at, epoch, kind, project, worker_id, lease_grant
    from jsonb_to_record(op) as x(run_id text, step_id text, attempt integer, key text,
                                               started_at timestamptz, epoch integer, kind text, project text,
                                               worker_id text, lease_grant integer);
    return 0;
end $$;
