-- 0012_metric_deltas: a finished attempt costs its commit one heap insert instead of an upsert into the rollup.
-- The 0010 trigger joined the run, bucketed the duration and upserted one of eight shard rows per attempt: 36 us
-- of the 206 us an attempt's insert + finish took on one connection (bench/bench_attempt_rollup.py), more under
-- concurrency where finishes of one step queue on the same rows. Now the trigger appends a delta to a table with no
-- index; one folder at a time (the per-process metrics flusher, every second) moves deltas into the rollup, and a
-- scrape reads the rollup plus the deltas not yet folded, so its figures stay exact between folds.
create table automation.metric_attempt_deltas (
    project_id text    not null,
    run_id     text    not null,
    step_id    text    not null,
    kind       text    not null,
    status     text    not null,
    retry      boolean not null,
    seconds    float8  not null
);

create or replace function automation.metric_attempt_finished() returns trigger
    language plpgsql
    as $$
begin
    if new.status = 'running' or (tg_op = 'UPDATE' and old.status <> 'running') then
        return null;
    end if;
    insert into automation.metric_attempt_deltas (project_id, run_id, step_id, kind, status, retry, seconds)
    -- a partition's attempts (`step[partition]`, migration 0015) count under their step: one series per step
    values (new.project_id, new.run_id, split_part(new.step_id, '[', 1), new.kind, new.status, new.attempt > 1,
            greatest(extract(epoch from new.finished_at - new.started_at), 0));
    return null;
end
$$;

-- Moves every delta into the rollup in one transaction; returns how many it moved, or null when another session is
-- folding (the deltas wait for the next fold: nobody queues behind a fold). A delta whose run is gone by then
-- (deleted in between) still counts, under workflow ''.
create function automation.metric_attempts_fold() returns bigint
    language plpgsql
    as $$
declare
    moved bigint;
begin
    if not pg_try_advisory_xact_lock(hashtext('a44.automation.metric_attempts.fold')) then
        return null;
    end if;
    with d as (
        delete from automation.metric_attempt_deltas returning *
    ), rolled as (
        insert into automation.metric_attempts as m (project_id, workflow_id, step_id, kind, status, bucket, shard,
                                                     attempts, retries, seconds)
        select d.project_id, coalesce(r.workflow_id, ''), d.step_id, d.kind, d.status,
               automation.metric_bucket(d.seconds), 0, count(*), count(*) filter (where d.retry), sum(d.seconds)
        from d left join automation.runs r on r.run_id = d.run_id
        group by 1, 2, 3, 4, 5, 6
        order by 1, 2, 3, 4, 5, 6
        on conflict (project_id, workflow_id, step_id, kind, status, bucket, shard) do update
            set attempts = m.attempts + excluded.attempts, retries = m.retries + excluded.retries,
                seconds = m.seconds + excluded.seconds
        returning 1
    )
    select count(*) into moved from d;
    return moved;
end
$$;
