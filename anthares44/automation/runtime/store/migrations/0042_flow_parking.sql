-- 0042_flow_parking: a full key's backlog leaves the claim's window in one statement (docs/flow.md "Admission").
--
-- 0039's claim saw the first 4 x batch due runs (by due time) and parked those of them behind a full key; a tenant
-- with 10,000 earlier runs thus filled the window for ~40 claims before another tenant's runs were seen (issue 30's
-- first bar: B's p95 wait 14 s against a 7.2 s bar; the keyer, keying 256 runs per claim, did the same: it now
-- drains a burst, runtime/engine/flow_keys.py), and did so again each time its parks ran out (60 s).
-- Now, when the window is full (it may not hold every due run) and one of its candidates names a key that is full
-- once this claim's grants are in (its live holders + the runs it grants now >= its limit), every other due,
-- never-started run naming that key is parked too, in the same statement: found through the key
-- (runs_flow_open_idx, GIN), not by walking the due runs. Such a run could not have been granted in this claim
-- (its key has no room left), and a holder exists to promote it (trigger runs_flow_promote, 0039) when it lets its
-- slot go. The rest of the claim is 0039's, unchanged (granted also returns flow_keys and flow_caps).

create or replace function automation.lease_claim(p_worker_id text, p_now timestamptz, p_limit integer, p_lease interval,
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
declare
    sorting text;
    caching text;
begin
    perform set_config('a44.notify', 'deferred', true);    -- before the grants fire the triggers
    perform pg_advisory_xact_lock(hashtext('a44.automation.lease_claim'));
    sorting := current_setting('enable_sort');
    caching := current_setting('plan_cache_mode');
    perform set_config('enable_sort', 'off', true);
    perform set_config('plan_cache_mode', 'force_generic_plan', true);
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
    ), fheld as (       -- holders of each concurrency key, counted now (never a stored counter)
        select x.project_id, x.key, count(*)::integer as n
        from (select r.project_id, u.key
              from automation.runs r cross join lateral unnest(r.flow_keys) u(key)
              where r.lease_owner is not null and r.flow_keys is not null
              union all
              select r.project_id, u.key
              from automation.runs r cross join lateral unnest(r.flow_keys, r.flow_hold) u(key, hold)
              where r.flow_holds and r.lease_owner is null and u.hold
                and r.state in ('running', 'waiting', 'sleeping', 'awaiting_confirmation', 'compensating')) x
        group by 1, 2
    ), cand as (
        select r.run_id, r.project_id, coalesce(r.queue, 'q_default') as queue, r.workflow_id, r.version,
               r.next_wake_at, r.lease_owner is not null as reclaim, r.state as rstate, r.flow_keys, r.flow_caps,
               r.flow_hold, r.flow_throttle, r.flow_weights,
               -- priority with aging: a level gained per 30 s since creation, so none waits forever
               greatest(1, coalesce(r.flow_priority, 5)
                           - floor(extract(epoch from (p_now - r.created_at)) / 30))::integer as eprio,
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
          and r.flow_keyed is not false
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
    ), tok as (         -- the throttle buckets of the candidates, refilled to p_now
        select k.project_id, k.key, k.max_n, k.per_ms,
               least(k.burst::double precision,
                     k.tokens + extract(epoch from (p_now - k.refilled_at)) * 1000.0 * k.max_n / k.per_ms) as avail
        from automation.flow_keys k
        where (k.project_id, k.key) in (select c.project_id, c.flow_throttle from cand c
                                        where c.flow_throttle is not null and not c.reclaim)
    ), share as (       -- per candidate and key: the key's use once this run and those before it of the key got in
        select c.run_id, c.project_id, c.next_wake_at, c.eprio, c.rstate, u.key, u.cap, u.hold,
               coalesce((select h.n from fheld h where h.project_id = c.project_id and h.key = u.key), 0) as held,
               (coalesce((select h.n from fheld h where h.project_id = c.project_id and h.key = u.key), 0)
                + row_number() over (partition by c.project_id, u.key order by c.eprio, c.next_wake_at, c.run_id))
               ::double precision / u.weight as term
        from cand c cross join lateral unnest(c.flow_keys, c.flow_caps, c.flow_hold, c.flow_weights)
                                       u(key, cap, hold, weight)
        where not c.reclaim and not c.blocked and c.flow_keys is not null
    ), tot as (
        select run_id, sum(term) as s from share group by run_id
    ), need as (        -- each candidate's keys it does not hold yet, ranked per key (fair share first); room per key
        select n.run_id, n.key, n.kind,
               row_number() over (partition by n.project_id, n.key order by n.eprio, n.score, n.next_wake_at, n.run_id)
                   as ki,
               n.room
        from (select s.run_id, s.project_id, s.next_wake_at, s.eprio, s.key, 'c' as kind, s.cap - s.held as room,
                     t.s - s.term as score       -- the use of its other keys: the least used tenant goes first
              from share s join tot t on t.run_id = s.run_id
              where not (s.hold and s.rstate <> 'pending')
              union all
              select c.run_id, c.project_id, c.next_wake_at, c.eprio, c.flow_throttle, 't',
                     floor(coalesce(t.avail, 1))::integer, 0
              from cand c left join tok t on t.project_id = c.project_id and t.key = c.flow_throttle
              where not c.reclaim and not c.blocked and c.flow_throttle is not null) n
    ), over as (
        select run_id, bool_or(kind = 'c') as by_key from need where ki > room group by run_id
    ), ranked as (
        select c.run_id, c.next_wake_at, c.reclaim, c.eprio,
               row_number() over (partition by c.project_id, c.queue order by c.eprio, c.next_wake_at, c.run_id) as qi,
               row_number() over (partition by c.project_id, c.workflow_id order by c.eprio, c.next_wake_at, c.run_id)
                   as wi,
               coalesce(q.max_concurrency, 100) - coalesce(f.n, 0) as qroom,
               v.max_concurrency - coalesce(w.n, 0) as wroom
        from cand c
        join automation.workflow_versions v
          on v.project_id = c.project_id and v.workflow_id = c.workflow_id and v.version = c.version
        left join automation.queues q on q.project_id = c.project_id and q.queue_id = c.queue
        left join qfull f on f.project_id = c.project_id and f.queue = c.queue
        left join wheld w on w.project_id = c.project_id and w.workflow_id = c.workflow_id
        where not c.blocked and not c.reclaim and not exists (select 1 from over o where o.run_id = c.run_id)
    ), pick as (
        select run_id, 0 as eprio, next_wake_at from cand where reclaim
        union all
        select run_id, eprio, next_wake_at from ranked where qi <= qroom and wi <= wroom
    ), due as (
        select x.run_id, x.prev_state, x.prev_owner
        from (select run_id from pick order by eprio, next_wake_at limit p_limit) p
        cross join lateral (select r.run_id, r.state as prev_state, r.lease_owner as prev_owner
                            from automation.runs r
                            where r.run_id = p.run_id and r.next_wake_at <= p_now
                              and r.state in ('pending', 'running', 'waiting', 'sleeping', 'compensating')
                            for update skip locked) x
    ), parked as (      -- behind an unfinished run of their partition: out of the due set until it finishes
        update automation.runs r
        set next_wake_at = p_park_until
        from (select x.run_id
              from (select run_id from cand where blocked) c
              cross join lateral (select y.run_id from automation.runs y
                                  where y.run_id = c.run_id and y.state = 'pending' and y.lease_owner is null
                                    and y.next_wake_at <= p_now
                                  for update skip locked) x) b
        where r.run_id = b.run_id
    ), flow_parked as ( -- behind a full key: until a holder lets a slot go (or :park_until); throttled: next token
        update automation.runs r
        set next_wake_at = case when o.by_key then p_park_until
                                else least(p_park_until, p_now + coalesce(
                                    (select make_interval(secs => ((1.0 - (t.avail - floor(t.avail))) * t.per_ms
                                                                   / t.max_n) / 1000.0)
                                     from tok t where t.project_id = r.project_id and t.key = r.flow_throttle),
                                    interval '1 second')) end,
            flow_parked_at = case when o.by_key then p_now else null end
        from (select v.run_id, v.by_key
              from over v
              cross join lateral (select y.run_id from automation.runs y
                                  where y.run_id = v.run_id and y.lease_owner is null and y.next_wake_at <= p_now
                                    and y.state in ('pending', 'waiting', 'sleeping', 'compensating')
                                  for update skip locked) x) o
        where r.run_id = o.run_id
    ), granted as (
        update automation.runs r
        set state = case when r.state = 'compensating' then 'compensating' else 'running' end,
            lease_owner = p_worker_id, lease_deadline = p_now + p_lease, next_wake_at = p_now + p_lease,
            lease_grants = r.lease_grants + 1,
            lease_reclaims = r.lease_reclaims + (due.prev_owner is not null)::integer,
            started_at = coalesce(r.started_at, p_now), updated_at = p_now, flow_parked_at = null
        from due
        where r.run_id = due.run_id
        returning r.run_id, r.project_id, r.workflow_id, r.version, r.state, r.input, r.idempotency_key,
                  r.trigger_id, r.event_id, r.partition_key, r.queue, r.epoch, r.current_step, r.failed_step,
                  r.error_code, r.error_message, r.lease_grants, r.lease_reclaims, r.deadline_at, r.created_at,
                  r.delivery, due.prev_state, due.prev_owner, r.flow_throttle, r.flow_keys, r.flow_caps
    ), key_parked as ( -- a key full once these grants are in: its other due runs parked with those of the window
        update automation.runs r
        set next_wake_at = p_park_until, flow_parked_at = p_now
        from (select x.run_id
              from (select f.project_id, f.key
                    from (select c.project_id, u.key, u.cap, 0 as n         -- full before this claim
                          from cand c cross join lateral unnest(c.flow_keys, c.flow_caps) u(key, cap)
                          where not c.reclaim
                          union all
                          select g.project_id, u.key, u.cap, 1              -- a slot this claim gave
                          from granted g cross join lateral unnest(g.flow_keys, g.flow_caps) u(key, cap)
                          where g.prev_state = 'pending' and g.prev_owner is null) f
                    left join fheld h on h.project_id = f.project_id and h.key = f.key
                    where p_limit > 0 and (select count(*) from cand) >= p_limit * 4
                    group by f.project_id, f.key
                    having coalesce(max(h.n), 0) + sum(f.n) >= min(f.cap)) k
              cross join lateral (select y.run_id from automation.runs y
                                  where y.flow_keys @> array[k.key] and y.project_id = k.project_id
                                    and y.state = 'pending' and y.lease_owner is null and y.next_wake_at <= p_now
                                    and y.flow_keyed
                                    and not exists (select 1 from cand c where c.run_id = y.run_id)
                                  for update skip locked) x) b
        where r.run_id = b.run_id
    ), tokens_used as ( -- the throttle rows locked and charged in the statement that grants
        update automation.flow_keys k
        set tokens = t.avail - g.n, refilled_at = p_now, used_at = p_now
        from (select g.project_id, g.flow_throttle as key, count(*)::integer as n
              from granted g where g.flow_throttle is not null and g.prev_owner is null
              group by 1, 2) g
        join tok t on t.project_id = g.project_id and t.key = g.key
        where k.project_id = g.project_id and k.key = g.key
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
    select g.run_id, g.project_id, g.workflow_id, g.version, g.state, g.input, g.idempotency_key, g.trigger_id,
           g.event_id, g.partition_key, g.queue, g.epoch, g.current_step, g.failed_step, g.error_code,
           g.error_message, g.lease_grants, g.lease_reclaims, g.deadline_at, g.created_at, g.delivery,
           g.prev_state, g.prev_owner
    from granted g;
    perform set_config('enable_sort', sorting, true);
    perform set_config('plan_cache_mode', caching, true);
end
$$;
