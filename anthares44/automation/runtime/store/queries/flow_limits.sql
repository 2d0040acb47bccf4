-- Flow limits (§22, docs/flow.md): computing a run's keys before its admission, sweeping idle keys, explaining
-- what holds a run back. The admission itself is lease_claim (leases.sql, migration 0039).

-- name: flow_unkeyed
-- purpose: runs whose flow keys are still to compute (runs_flow_unkeyed_idx), oldest first, at most :limit
select run_id, project_id, workflow_id, version, input
from automation.runs
where flow_keyed = false and state = 'pending'
order by created_at
limit :limit;

-- name: flow_key_run
-- purpose: write one run's computed keys at :now (:doc), or skip / dead-letter it, in one transaction with its row locked (automation.flow_key_run, 0039); refuses a new key past :max_keys live keys of its limit
select automation.flow_key_run(:now, :doc::jsonb, :max_keys);

-- name: flow_keys_sweep
-- purpose: delete at most :limit keys idle since :now - :idle (or their window) that no unfinished run names
select automation.flow_keys_sweep(:now, :idle, :limit);

-- name: flow_explain_run
-- purpose: a run's admission state: its flow keys, whether it is parked behind one and since when, its queue and priority
select run_id, project_id, workflow_id, version, state, coalesce(queue, 'q_default') as queue, seq, created_at,
       next_wake_at, lease_owner, flow_keyed, flow_keys, flow_caps, flow_hold, flow_throttle, flow_parked_at,
       coalesce(flow_priority, 5) as priority, started_at
from automation.runs
where run_id = :run_id and project_id = :project;

-- name: flow_explain_key
-- purpose: one concurrency key of project :project now: live holders, the oldest of them, and the runs waiting for it that came before seq :seq (runs_flow_open_idx)
with holders as (
    select r.run_id, r.started_at
    from automation.runs r cross join lateral unnest(r.flow_keys, r.flow_hold) u(key, hold)
    where r.project_id = :project and r.flow_keys @> array[:key::text] and u.key = :key
      and r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')
      and (r.lease_owner is not null or (u.hold and r.state <> 'pending'))
)
select (select count(*) from holders)::integer as in_use,
       (select run_id from holders order by started_at, run_id limit 1) as oldest_run_id,
       (select min(started_at) from holders) as oldest_since,
       (select count(*) from automation.runs w
        where w.project_id = :project and w.flow_keys @> array[:key::text] and w.seq < :seq
          and w.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')
          and w.lease_owner is null and w.state = 'pending')::integer as ahead;

-- name: flow_explain_bucket
-- purpose: the stored row of flow key :key (a throttle's tokens at refilled_at; a limit's bounds)
select key, limit_id, value, kind, max_n, per_ms, burst, tokens, refilled_at
from automation.flow_keys where project_id = :project and key = :key;

-- name: flow_explain_caps
-- purpose: the queue and workflow caps a run of :workflow_id version :version on :queue counts against, and their slots in use now
select (select count(*) from automation.runs r
        where r.lease_owner is not null and r.project_id = :project and coalesce(r.queue, 'q_default') = :queue)::integer
           as queue_in_use,
       coalesce((select q.max_concurrency from automation.queues q where q.project_id = :project and q.queue_id = :queue),
                100) as queue_cap,
       (select count(*) from automation.runs r
        where r.lease_owner is not null and r.project_id = :project and r.workflow_id = :workflow_id)::integer
           as workflow_in_use,
       (select v.max_concurrency from automation.workflow_versions v
        where v.project_id = :project and v.workflow_id = :workflow_id and v.version = :version) as workflow_cap;

-- name: flow_any_limits
-- purpose: whether any published version declares flow limits (the keyer has nothing to do otherwise)
select exists (select 1 from automation.workflow_versions where has_flow);
