-- 0010_metrics: totals that no row records (webhook rejections, dropped filter misses) survive restarts
-- (docs/metrics.md). Each process adds what it counted since its last flush in one batched upsert per second,
-- so a flood of rejected requests costs one statement per second, never a row per request.
create table automation.metric_counters (
    name text not null,
    labels jsonb not null,
    value bigint not null default 0 check (value >= 0),
    updated_at timestamptz not null,
    primary key (name, labels)
);

-- Finished step attempts rolled up as they finish, so a scrape reads a few thousand rows instead of aggregating
-- the whole log (1,000,000 attempts took 1.1 s to aggregate; bench/bench_metrics.py). A trigger keeps it: the
-- writes of the interpreter are unchanged, and every path that finishes an attempt is counted. Totals only grow
-- (runs deleted later stay counted), as Prometheus counters must. `shard` spreads the rows concurrent finishes of
-- one step update, so daemons do not queue on one row lock.
create function automation.metric_duration_bounds() returns float8[]
    language sql immutable
    as $$ select array[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]::float8[] $$;

create table automation.metric_attempts (
    project_id text not null,
    workflow_id text not null,
    step_id text not null,
    kind text not null,
    status text not null,
    bucket integer not null,          -- how many bounds of metric_duration_bounds() lie below the durations
    shard integer not null,
    attempts bigint not null default 0,
    retries bigint not null default 0,
    seconds float8 not null default 0,
    primary key (project_id, workflow_id, step_id, kind, status, bucket, shard)
);

create function automation.metric_bucket(d float8) returns integer
    language sql immutable
    as $$ select count(*)::integer from unnest(automation.metric_duration_bounds()) b where b < d $$;

create function automation.metric_attempt_finished() returns trigger
    language plpgsql
    as $$
declare
    d float8;
begin
    if new.status = 'running' or (tg_op = 'UPDATE' and old.status <> 'running') then
        return null;
    end if;
    d := greatest(extract(epoch from new.finished_at - new.started_at), 0);
    insert into automation.metric_attempts as m (project_id, workflow_id, step_id, kind, status, bucket, shard,
                                                 attempts, retries, seconds)
    select new.project_id, r.workflow_id, new.step_id, new.kind, new.status, automation.metric_bucket(d),
           hashtext(new.run_id) & 7, 1, (new.attempt > 1)::integer, d
    from automation.runs r where r.run_id = new.run_id
    on conflict (project_id, workflow_id, step_id, kind, status, bucket, shard) do update
        set attempts = m.attempts + 1, retries = m.retries + excluded.retries, seconds = m.seconds + excluded.seconds;
    return null;
end
$$;

insert into automation.metric_attempts (project_id, workflow_id, step_id, kind, status, bucket, shard, attempts,
                                        retries, seconds)
select a.project_id, r.workflow_id, a.step_id, a.kind, a.status,
       automation.metric_bucket(greatest(extract(epoch from a.finished_at - a.started_at), 0)), 0, count(*),
       count(*) filter (where a.attempt > 1), sum(greatest(extract(epoch from a.finished_at - a.started_at), 0))
from automation.step_attempts a
join automation.runs r on r.run_id = a.run_id
where a.status <> 'running'
group by 1, 2, 3, 4, 5, 6;

create trigger step_attempts_metrics after insert or update of status on automation.step_attempts
    for each row execute function automation.metric_attempt_finished();
