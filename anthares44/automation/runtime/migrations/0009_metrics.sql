-- 0009_metrics: totals that no row records (webhook rejections, dropped filter misses) survive restarts
-- (docs/metrics.md). Each process adds what it counted since its last flush in one batched upsert per second,
-- so a flood of rejected requests costs one statement per second, never a row per request.
create table automation.metric_counters (
    name text not null,
    labels jsonb not null,
    value bigint not null default 0 check (value >= 0),
    updated_at timestamptz not null,
    primary key (name, labels)
);
