-- Metrics (§16, docs/metrics.md): the system's values read at scrape time, so every daemon, HTTP plane and the
-- CLI report the same numbers and none resets on restart.

-- name: metrics_queues
-- purpose: per project and queue (published, or holding waiting runs or dead letters): runs waiting, age in seconds at :now of the oldest waiting message, DLQ depth (entries not redriven)
with waiting as (     -- runs_queue_waiting_idx
    select project_id, coalesce(queue, 'q_default') as queue, count(*) as n, min(created_at) as oldest
    from automation.runs
    where state = 'pending'
    group by 1, 2
), dlq as (           -- dead_letters_waiting_idx
    select project_id, coalesce(queue, 'q_default') as queue, count(*) as n
    from automation.dead_letters
    where redriven_at is null
    group by 1, 2
), names as (
    select project_id, queue_id as queue from automation.queues
    union select project_id, queue from waiting
    union select project_id, queue from dlq
)
select n.project_id, n.queue, coalesce(w.n, 0)::bigint as waiting,
       coalesce(greatest(extract(epoch from :now - w.oldest), 0), 0)::float8 as oldest_age_s,
       coalesce(d.n, 0)::bigint as dlq_depth
from names n
left join waiting w on w.project_id = n.project_id and w.queue = n.queue
left join dlq d on d.project_id = n.project_id and d.queue = n.queue
order by 1, 2;

-- name: metrics_runs
-- purpose: per project, workflow and run state: runs, lease re-grants (runs.lease_reclaims) and redeliveries (deliveries after the first) summed over them
select project_id, workflow_id, state, count(*)::bigint as runs,
       coalesce(sum(lease_reclaims), 0)::bigint as lease_reclaims,
       coalesce(sum(delivery - 1), 0)::bigint as redeliveries
from automation.runs
group by 1, 2, 3
order by 1, 2, 3;

-- name: metrics_projects
-- purpose: every project that published a workflow or a queue: its counters are exported (at 0) before its first run
select project_id from automation.workflow_versions
union
select project_id from automation.queues
order by 1;

-- name: metrics_attempts
-- purpose: finished step attempts per project, workflow, step, kind, status and duration bucket (how many bounds of metric_duration_bounds() lie below): attempts, retries (attempt > 1), summed seconds, from the rollup plus the deltas and sums (0047) not folded into it yet
select project_id, workflow_id, step_id, kind, status, bucket, sum(attempts)::bigint as attempts,
       sum(retries)::bigint as retries, sum(seconds)::float8 as seconds
from (
    select project_id, workflow_id, step_id, kind, status, bucket, attempts, retries, seconds
    from automation.metric_attempts
    union all
    select d.project_id, coalesce(r.workflow_id, ''), d.step_id, d.kind, d.status,
           automation.metric_bucket(d.seconds), 1, d.retry::integer, d.seconds
    from automation.metric_attempt_deltas d left join automation.runs r on r.run_id = d.run_id
    union all
    select s.project_id, coalesce(r.workflow_id, ''), s.step_id, s.kind, s.status, s.bucket, s.attempts, s.retries,
           s.seconds
    from automation.metric_attempt_sums s left join automation.runs r on r.run_id = s.run_id
) a
group by 1, 2, 3, 4, 5, 6;

-- name: metrics_timer_lateness
-- purpose: fired timers (§19: sleeps that ended succeeded, with the due instant stored when they opened, migration 0034) per project, workflow and lateness bucket (how many bounds of :bounds lie below finished_at - due_at): how many and their summed lateness in seconds
with t as (
    select a.project_id, coalesce(r.workflow_id, '') as workflow_id,
           greatest(extract(epoch from a.finished_at - a.due_at), 0)::float8 as late
    from automation.step_attempts a
    left join automation.runs r on r.run_id = a.run_id
    where a.due_at is not null and a.finished_at is not null and a.status = 'succeeded' and a.kind = 'action'
)
select project_id, workflow_id, (select count(*) from unnest(:bounds::float8[]) b where b < t.late)::integer as bucket,
       count(*)::bigint as fired, sum(late)::float8 as seconds
from t
group by 1, 2, 3
order by 1, 2, 3;

-- name: metrics_attempts_fold
-- purpose: move the finished attempts' deltas and sums into the rollup (one folder at a time); how many moved, null when another session is folding
select automation.metric_attempts_fold_v2();

-- name: metrics_duration_bounds
-- purpose: the upper bounds (seconds) of the step-duration histogram's buckets
select automation.metric_duration_bounds();

-- name: metrics_breakers
-- purpose: every circuit breaker's state and how often it opened
select project_id, connector_id, state, opened_count::bigint as opened
from automation.circuit_breakers
order by 1, 2;

-- name: metrics_deliveries
-- purpose: event deliveries recorded per project, trigger and outcome (filter misses of triggers that keep them, dead-lettered, created, deduplicated)
select project_id, trigger_id, outcome, count(*)::bigint as n
from automation.event_deliveries
group by 1, 2, 3
order by 1, 2, 3;

-- name: metrics_counters
-- purpose: the persisted totals no row records (webhook rejections, dropped filter misses), as flushed by every process
select name, labels, value from automation.metric_counters order by name, labels::text;

-- name: metrics_counters_add
-- purpose: add one process's counts since its last flush (:names, :labels as JSON text, :increments) at :now, in one statement
insert into automation.metric_counters as m (name, labels, value, updated_at)
select n, l::jsonb, v, :now from unnest(:names::text[], :labels::text[], :increments::bigint[]) as t(n, l, v)
on conflict (name, labels) do update set value = m.value + excluded.value, updated_at = excluded.updated_at;

-- name: metrics_flow_pauses
-- purpose: per project: flow keys paused at :now (§22), and pauses ever begun over all its keys
select project_id,
       count(*) filter (where paused_until > :now)::bigint as paused,
       sum(paused_count)::bigint as pauses
from automation.flow_pauses
group by 1
order by 1;

-- name: metrics_flow_limits
-- purpose: per project and flow limit at :now (§22): slots in use (live holders), runs parked behind its keys and the longest of their waits, runs its rateLimit skipped ever
with used as (
    select r.project_id, split_part(u.key, '=', 1) as limit_id, count(*)::bigint as n
    from automation.runs r cross join lateral unnest(r.flow_keys, r.flow_hold) u(key, hold)
    where r.flow_keys is not null
      and (r.lease_owner is not null
           or (r.flow_holds and u.hold and r.state in ('running', 'waiting', 'sleeping', 'awaiting_confirmation',
                                                       'compensating')))
    group by 1, 2
), parked as (
    select r.project_id, split_part(u.key, '=', 1) as limit_id, count(*)::bigint as n,
           max(extract(epoch from (:now - r.created_at)))::double precision as longest_s
    from automation.runs r cross join lateral unnest(r.flow_keys) u(key)
    where r.flow_parked_at is not null
    group by 1, 2
)
select coalesce(u.project_id, p.project_id, l.project_id) as project_id,
       coalesce(u.limit_id, p.limit_id, l.limit_id) as limit_id,
       coalesce(u.n, 0) as in_use, coalesce(p.n, 0) as waiting, coalesce(p.longest_s, 0) as longest_wait_s,
       coalesce(l.skipped, 0) as skipped
from used u
full join parked p on p.project_id = u.project_id and p.limit_id = u.limit_id
full join automation.flow_limit_keys l
  on l.project_id = coalesce(u.project_id, p.project_id) and l.limit_id = coalesce(u.limit_id, p.limit_id)
order by 1, 2;
