-- 0047_attempt_records: attempts written together travel as one operation (issue 32, rows per partition). A chunk
-- of `pass` partitions (fanout.py, INLINE_CHUNK at a time) recorded each attempt with its own attempt_record op:
-- one INSERT of the attempt, one of its attempt.finished event, and one metric delta row per attempt (0012's
-- trigger), which the fold then deleted: two of the seven rows a `pass` partition wrote. `attempt_records` inserts
-- the batch's attempts in one statement, their events in one more, and one row of metric_attempt_sums per (run,
-- step, kind, status, duration bucket), folded like the deltas. The row trigger stays for every other write
-- of an attempt; it skips the rows of this op (a transaction-local setting the op sets around its insert).
-- in place: automation.metric_attempt_finished(); older daemons never set a44.attempt_sums, so they see no change
-- Additive: a daemon of schema 46 still folds and reads the deltas only; until a daemon of this schema folds the
-- sums (every second), its scrape misses the attempts of the chunks written since.

create table automation.metric_attempt_sums (
    project_id text    not null,
    run_id     text    not null,
    step_id    text    not null,
    kind       text    not null,
    status     text    not null,
    bucket     integer not null,
    attempts   integer not null,
    retries    integer not null,
    seconds    float8  not null
);

-- As 0012, but silent for the rows engine_op_attempt_records counts itself. Redefined in place rather than put
-- behind a new trigger: swapping the trigger of step_attempts takes an AccessExclusiveLock on the table (and each
-- of its partitions) while older daemons write to it (a deadlock with their reads in tests/rolling), and a daemon
-- of schema 46 never sets a44.attempt_sums, so for it nothing changes.
create or replace function automation.metric_attempt_finished() returns trigger
    language plpgsql
    as $$
begin
    if new.status = 'running' or (tg_op = 'UPDATE' and old.status <> 'running')
       or current_setting('a44.attempt_sums', true) = 'op' then
        return null;
    end if;
    insert into automation.metric_attempt_deltas (project_id, run_id, step_id, kind, status, retry, seconds)
    -- a partition's attempts (`step[partition]`, migration 0015) count under their step: one series per step
    values (new.project_id, new.run_id, split_part(new.step_id, '[', 1), new.kind, new.status, new.attempt > 1,
            greatest(extract(epoch from new.finished_at - new.started_at), 0));
    return null;
end
$$;

-- Finished attempts written at once (op.rows: each what attempt_record takes), with one attempt.finished event
-- each, in the order given, and their metric sums.
create function automation.engine_op_attempt_records(op jsonb) returns void
    language plpgsql
    as $$
begin
    perform set_config('a44.attempt_sums', 'op', true);
    with x as (
        select * from rows from (jsonb_to_recordset(op -> 'rows')
                as (run_id text, step_id text, attempt integer, key text, started_at timestamptz, epoch integer,
                    kind text, project text, worker_id text, lease_grant integer, status text, error_code text,
                    error_message text, result text, result_bytes integer, retry_at timestamptz,
                    result_ref text, finished_at timestamptz)) with ordinality
            as r(run_id, step_id, attempt, key, started_at, epoch, kind, project, worker_id, lease_grant, status,
                 error_code, error_message, result, result_bytes, retry_at, result_ref, finished_at, n)
    ), a as (
        insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, error_code,
                                              error_message, result, started_at, finished_at, epoch, kind,
                                              project_id, worker_id, lease_grant, result_bytes, retry_at, result_ref)
        select run_id, step_id, attempt, key, status, error_code, error_message, result::jsonb, started_at,
               finished_at, epoch, kind, project, worker_id, lease_grant, result_bytes, retry_at, result_ref
        from x order by n
    ), e as (
        insert into automation.run_events (run_id, project_id, at, kind, step_id, attempt, status, error_code,
                                           message, data)
        select run_id, project, finished_at, 'attempt.finished', step_id, attempt, status, error_code, error_message,
               jsonb_build_object('epoch', epoch, 'kind', kind, 'retry_at', retry_at,
                                  'duration_ms', round(extract(epoch from finished_at - started_at) * 1000))
        from x order by n
    )
    insert into automation.metric_attempt_sums (project_id, run_id, step_id, kind, status, bucket, attempts,
                                                retries, seconds)
    select s.project, s.run_id, s.step, s.kind, s.status, automation.metric_bucket(s.d), count(*),
           count(*) filter (where s.attempt > 1), sum(s.d)
    from (select project, run_id, split_part(step_id, '[', 1) as step, kind, status, attempt,
                 greatest(extract(epoch from finished_at - started_at), 0)::float8 as d
          from x where status <> 'running') s
    group by 1, 2, 3, 4, 5, 6;
    perform set_config('a44.attempt_sums', '', true);
end
$$;

-- As metric_attempts_fold (0012), and the sums too; returns how many attempts it moved.
create function automation.metric_attempts_fold_v2() returns bigint
    language plpgsql
    as $$
declare
    moved bigint;
begin
    if not pg_try_advisory_xact_lock(hashtext('a44.automation.metric_attempts.fold')) then
        return null;
    end if;
    with d as (
        delete from automation.metric_attempt_deltas returning project_id, run_id, step_id, kind, status,
            automation.metric_bucket(seconds) as bucket, 1 as attempts, retry::integer as retries, seconds
    ), s as (
        delete from automation.metric_attempt_sums returning *
    ), both_ as (
        select * from d union all select * from s
    ), rolled as (
        insert into automation.metric_attempts as m (project_id, workflow_id, step_id, kind, status, bucket, shard,
                                                     attempts, retries, seconds)
        select b.project_id, coalesce(r.workflow_id, ''), b.step_id, b.kind, b.status, b.bucket, 0,
               sum(b.attempts), sum(b.retries), sum(b.seconds)
        from both_ b left join automation.runs r on r.run_id = b.run_id
        group by 1, 2, 3, 4, 5, 6
        order by 1, 2, 3, 4, 5, 6
        on conflict (project_id, workflow_id, step_id, kind, status, bucket, shard) do update
            set attempts = m.attempts + excluded.attempts, retries = m.retries + excluded.retries,
                seconds = m.seconds + excluded.seconds
        returning 1
    )
    select coalesce(sum(attempts), 0) into moved from both_;
    return moved;
end
$$;
