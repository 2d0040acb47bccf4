-- 0022_lease_claim: a claim is one statement, one round trip (docs/runtime.md, "Performance"). The daemon sent
-- BEGIN, the advisory lock (lease_claim_lock), the claim and COMMIT: four round trips, twice per run when the
-- runs come one at a time. `automation.lease_claim` takes the same transaction advisory lock, then claims in a
-- statement of its own: a VOLATILE function's statements each take a fresh snapshot (READ COMMITTED), so the
-- slots in use are counted with every earlier claim committed, as before (queue and workflow limits hold across
-- daemons, docs/queues.md). Called as an autocommit statement, the transaction is the call: the lock is held
-- until its commit, the grants commit with it.

-- Grant up to p_limit due runs to p_worker_id at p_now for p_lease within queue maxConcurrency, workflow
-- concurrency.max and by-partition heads (skip locked), park non-head runs until p_park_until, count takeovers of
-- expired leases and log the state changes (their NOTIFY deferred to the engine, 0006). Returns the granted runs
-- with their state and owner before the grant.
create function automation.lease_claim(p_worker_id text, p_now timestamptz, p_limit integer, p_lease interval,
                                       p_park_until timestamptz)
    returns table (run_id text, project_id text, workflow_id text, version integer, state text, input jsonb,
                   idempotency_key text, trigger_id text, event_id text, partition_key text, queue text,
                   epoch integer, current_step text, failed_step text, error_code text, error_message text,
                   lease_grants integer, lease_reclaims integer, deadline_at timestamptz, created_at timestamptz,
                   delivery integer, prev_state text, prev_owner text)
    language plpgsql
    volatile
    as $$
#variable_conflict use_column
begin
    perform set_config('a44.notify', 'deferred', true);    -- before the grants fire the triggers
    perform pg_advisory_xact_lock(hashtext('a44.automation.lease_claim'));
    return query
    with held as (      -- slots in use: runs whose lease is held (O(runs in flight), runs_leased_idx)
        select project_id, coalesce(queue, 'q_default') as queue, workflow_id, count(*)::integer as n
        from automation.runs
        where lease_owner is not null
        group by 1, 2, 3
    ), qfull as (
        select h.project_id, h.queue, sum(h.n)::integer as n, max(coalesce(q.max_concurrency, 100)) as cap
        from held h
        left join automation.queues q on q.project_id = h.project_id and q.queue_id = h.queue
        group by 1, 2
    ), wheld as (
        select project_id, workflow_id, sum(n)::integer as n from held group by 1, 2
    ), cand as (
        select r.run_id, r.project_id, coalesce(r.queue, 'q_default') as queue, r.workflow_id, r.version,
               r.next_wake_at, r.lease_owner is not null as reclaim,
               (r.state = 'pending' and r.lease_owner is null and r.partition_key is not null
                and exists (select 1 from automation.queues oq
                            where oq.project_id = r.project_id and oq.queue_id = r.queue and oq.ordering = 'by-partition')
                and exists (select 1 from automation.runs p
                            where p.project_id = r.project_id and p.queue = r.queue and p.partition_key = r.partition_key
                              and p.seq < r.seq
                              and p.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled'))) as blocked
        from automation.runs r
        where r.next_wake_at <= p_now
          and r.state in ('pending', 'running', 'waiting', 'sleeping', 'compensating')
          and (r.lease_owner is not null or (
               not exists (select 1 from qfull f
                           where f.project_id = r.project_id and f.queue = coalesce(r.queue, 'q_default') and f.n >= f.cap)
               and not exists (select 1 from wheld w
                               join automation.workflow_versions v
                                 on v.project_id = w.project_id and v.workflow_id = w.workflow_id and v.version = r.version
                               where w.project_id = r.project_id and w.workflow_id = r.workflow_id
                                 and w.n >= v.max_concurrency)))
        order by r.next_wake_at
        limit p_limit * 4
    ), ranked as (
        select c.run_id, c.next_wake_at, c.reclaim,
               row_number() over (partition by c.project_id, c.queue order by c.next_wake_at, c.run_id) as qi,
               row_number() over (partition by c.project_id, c.workflow_id order by c.next_wake_at, c.run_id) as wi,
               coalesce(q.max_concurrency, 100) - coalesce(f.n, 0) as qroom,
               v.max_concurrency - coalesce(w.n, 0) as wroom
        from cand c
        join automation.workflow_versions v
          on v.project_id = c.project_id and v.workflow_id = c.workflow_id and v.version = c.version
        left join automation.queues q on q.project_id = c.project_id and q.queue_id = c.queue
        left join qfull f on f.project_id = c.project_id and f.queue = c.queue
        left join wheld w on w.project_id = c.project_id and w.workflow_id = c.workflow_id
        where not c.blocked and not c.reclaim
    ), pick as (
        select run_id, next_wake_at from cand where reclaim
        union all
        select run_id, next_wake_at from ranked where qi <= qroom and wi <= wroom
    ), due as (
        select r.run_id, r.state as prev_state, r.lease_owner as prev_owner
        from automation.runs r
        where r.run_id in (select run_id from pick order by next_wake_at limit p_limit)
          and r.next_wake_at <= p_now
          and r.state in ('pending', 'running', 'waiting', 'sleeping', 'compensating')
        for update skip locked
    ), parked as (      -- behind an unfinished run of their partition: out of the due set until it finishes
        update automation.runs r
        set next_wake_at = p_park_until
        from (select x.run_id from automation.runs x
              where x.run_id in (select run_id from cand where blocked)
                and x.state = 'pending' and x.lease_owner is null and x.next_wake_at <= p_now
              for update skip locked) b
        where r.run_id = b.run_id
    ), granted as (
        update automation.runs r
        set state = case when r.state = 'compensating' then 'compensating' else 'running' end,
            lease_owner = p_worker_id, lease_deadline = p_now + p_lease, next_wake_at = p_now + p_lease,
            lease_grants = r.lease_grants + 1,
            lease_reclaims = r.lease_reclaims + (due.prev_owner is not null)::integer,
            started_at = coalesce(r.started_at, p_now), updated_at = p_now
        from due
        where r.run_id = due.run_id
        returning r.run_id, r.project_id, r.workflow_id, r.version, r.state, r.input, r.idempotency_key,
                  r.trigger_id, r.event_id, r.partition_key, r.queue, r.epoch, r.current_step, r.failed_step,
                  r.error_code, r.error_message, r.lease_grants, r.lease_reclaims, r.deadline_at, r.created_at,
                  r.delivery, due.prev_state, due.prev_owner
    ), state_events as (
        insert into automation.run_events (run_id, project_id, at, kind, state, data)
        select run_id, project_id, p_now, 'run.state', state,
               jsonb_build_object('from', prev_state, 'worker', p_worker_id, 'grant', lease_grants)
        from granted
        where prev_state <> state
    ), reclaim_events as (
        insert into automation.run_events (run_id, project_id, at, kind, state, data)
        select run_id, project_id, p_now, 'lease.reclaimed', state,
               jsonb_build_object('previous_owner', prev_owner, 'worker', p_worker_id, 'grant', lease_grants)
        from granted
        where prev_owner is not null
    )
    select * from granted;
end
$$;
