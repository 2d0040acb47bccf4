-- 0039_flow_limits: per-key concurrency and throttle at admission (§22, docs/flow.md).
--
-- A slot is not stored: it is a fact about a run. A run holds a slot of each of its concurrency keys while its
-- lease is held (`lease_owner is not null`), and of a `holdWhileWaiting` key from its first grant until it ends.
-- The claim counts those holders in the statement that grants (never a counter, so nothing can drift), and the
-- slot goes with whatever changes the lease: the commit that parks or ends a run, a shutdown release, the claim
-- that re-grants an expired lease. A run's keys are computed once, before its first admission, by the daemon's
-- keyer (runtime/engine/flow_keys.py): until then it is not claimable (`flow_keyed = false`).

alter table automation.runs add column flow_keyed boolean;       -- null: no flow limits; false: keys still to compute
alter table automation.runs add column flow_keys text[];         -- its concurrency keys ('c:<limit>=<value>')
alter table automation.runs add column flow_caps integer[];      -- the limit of each
alter table automation.runs add column flow_hold boolean[];      -- holdWhileWaiting of each
alter table automation.runs add column flow_holds boolean not null default false;   -- any of flow_hold
alter table automation.runs add column flow_throttle text;       -- its throttle key ('t:<workflow>=<value>')
alter table automation.runs add column flow_parked_at timestamptz;   -- parked by the claim behind a full key
alter table automation.runs add column flow_weights double precision[];   -- the share of each key (fairness)
alter table automation.runs add column flow_priority smallint;   -- 1 (first) .. 9; null: 5

-- the runs whose keys are still to compute (the keyer reads them in creation order)
create index runs_flow_unkeyed_idx on automation.runs (created_at) where flow_keyed = false;
-- holders of holdWhileWaiting keys that hold no lease (parked, still holding)
create index runs_flow_holding_idx on automation.runs (project_id)
    where flow_holds and lease_owner is null and state in ('running', 'waiting', 'sleeping', 'awaiting_confirmation',
                                                           'compensating');
-- the runs parked behind one of their keys, promoted when a holder of the key lets its slot go
create index runs_flow_parked_idx on automation.runs using gin (flow_keys) where flow_parked_at is not null;
create index runs_flow_parked_at_idx on automation.runs (flow_parked_at) where flow_parked_at is not null;

-- the unfinished runs naming a key (the sweep of idle keys)
create index runs_flow_open_idx on automation.runs using gin (flow_keys)
    where flow_keys is not null and state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled');

create index runs_flow_throttle_idx on automation.runs (project_id, flow_throttle)
    where flow_throttle is not null and state not in ('succeeded', 'partial', 'failed', 'compensation_failed',
                                                      'cancelled');

-- One row per live key: what the limit is, since when it is full, a throttle's token bucket, a rateLimit's
-- window. Keys of a limit are counted in flow_limit_keys (kept by trigger, in the same transaction).
create table automation.flow_keys (
    project_id   text        not null,
    key          text        not null,          -- c:<limit>=<value> | f: | t: | r:<workflow>=<value>
    limit_id     text        not null,          -- c:<workflow>#<i> | c:project | t:<workflow> | r:<workflow>
    value        text        not null,          -- what the key expression gave
    kind         text        not null check (kind in ('concurrency', 'fairness', 'throttle', 'rate')),
    max_n        integer     not null check (max_n > 0),
    per_ms       bigint,                        -- throttle, rate: the window
    burst        integer,                       -- throttle: tokens at most
    tokens       double precision,              -- throttle: tokens at refilled_at; rate: runs counted in the window
    refilled_at  timestamptz,                   -- throttle: when tokens was computed; rate: the window's start
    created_at   timestamptz not null,
    used_at      timestamptz not null,          -- a run last keyed or admitted on it
    primary key (project_id, key)
);
create index flow_keys_limit_idx on automation.flow_keys (project_id, limit_id);
create index flow_keys_idle_idx on automation.flow_keys (used_at);

create table automation.flow_limit_keys (
    project_id text   not null,
    limit_id   text   not null,
    live_keys  bigint not null default 0,
    skipped    bigint not null default 0,          -- runs a rateLimit skipped, ever (metrics)
    primary key (project_id, limit_id)
);

create function automation.flow_count_keys()
returns trigger
language plpgsql
as $$
begin
    if tg_op = 'INSERT' then
        insert into automation.flow_limit_keys as l (project_id, limit_id, live_keys)
        values (new.project_id, new.limit_id, 1)
        on conflict (project_id, limit_id) do update set live_keys = l.live_keys + 1;
    else
        update automation.flow_limit_keys set live_keys = live_keys - 1
        where project_id = old.project_id and limit_id = old.limit_id;
    end if;
    return null;
end
$$;
create trigger flow_keys_count after insert or delete on automation.flow_keys
    for each row execute function automation.flow_count_keys();

-- A version whose IR declares flow limits, without reading the IR per run.
alter table automation.workflow_versions add column has_flow boolean
    generated always as ((ir -> 'flow') is not null) stored;

-- Every way a run is created (ingestion, manual, schedules, children, redeliveries, redrives) passes here: a run of
-- a version with flow limits waits for its keys.
create function automation.flow_mark_unkeyed()
returns trigger
language plpgsql
as $$
begin
    if exists (select 1 from automation.workflow_versions v
               where v.project_id = new.project_id and v.workflow_id = new.workflow_id and v.version = new.version
                 and v.has_flow) then
        new.flow_keyed := false;
        new.flow_keys := null; new.flow_caps := null; new.flow_hold := null; new.flow_holds := false;
        new.flow_throttle := null; new.flow_parked_at := null; new.flow_weights := null; new.flow_priority := null;
    end if;
    return new;
end
$$;
create trigger runs_flow_unkeyed before insert on automation.runs
    for each row execute function automation.flow_mark_unkeyed();

-- A run lets its slots go (its lease released: parked, ended, handed back; a holdWhileWaiting run ended): the runs
-- parked behind its keys are due again. The claim lock first: a claim that parked a run in a snapshot taken before
-- this release committed has committed (its parks are seen here), and one that starts after sees the slot free.
create function automation.flow_promote_parked()
returns trigger
language plpgsql
as $$
declare
    n integer;
begin
    if (old.lease_owner is not null and new.lease_owner is null)
       or (new.flow_holds and new.state in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')
           and old.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')) then
        perform pg_advisory_xact_lock(hashtext('a44.automation.lease_claim'));
        update automation.runs p
        set next_wake_at = new.updated_at, flow_parked_at = null
        from (select h.run_id       -- the head of each set of keys parked behind one of these (FIFO in it)
              from (select distinct on (y.flow_keys) y.run_id, y.flow_parked_at, y.seq,
                           greatest(1, coalesce(y.flow_priority, 5)
                                       - floor(extract(epoch from (new.updated_at - y.created_at)) / 30)) as eprio
                    from automation.runs y
                    where y.flow_parked_at is not null and y.flow_keys && new.flow_keys
                      and y.project_id = new.project_id and y.run_id <> new.run_id
                    order by y.flow_keys, coalesce(y.flow_priority, 5), y.flow_parked_at, y.seq) h
              order by h.eprio, h.flow_parked_at, h.seq
              limit 32) x
        cross join lateral (select z.run_id from automation.runs z      -- never wait on a row while holding the
                            where z.run_id = x.run_id and z.flow_parked_at is not null     -- claim lock
                            for update skip locked) l
        where p.run_id = l.run_id;
        get diagnostics n = row_count;
        if n > 0 then
            perform pg_notify('a44_runs_due', (floor(extract(epoch from new.updated_at) * 1000))::bigint::text);
        end if;
    end if;
    return null;
end
$$;
create trigger runs_flow_promote after update of lease_owner, state on automation.runs
    for each row when (new.flow_keys is not null)
    execute function automation.flow_promote_parked();

-- The claim of 0027 with the flow limits (docs/flow.md "Admission"). Same arguments, result and claim lock; in
-- addition, in the same statement:
--   * a run whose keys are not computed yet (`flow_keyed = false`) is not a candidate;
--   * `fheld`: the holders of every concurrency key, counted now (runs_leased_idx, runs_flow_holding_idx);
--   * `need`: each candidate's keys that it does not hold yet (all of them, except a holdWhileWaiting key of a run
--     already started), ranked per key by due time; a throttle key counts as a key whose room is its whole tokens;
--   * a candidate ranked past its key's room is `over`: not granted; over because a concurrency key is full it is
--     parked (`flow_parked_at`, next_wake_at = :park_until) until a holder of the key lets a slot go (trigger
--     above), over because its throttle has no token it is due again at the next token's instant;
--   * the queue and workflow ranks are taken over the candidates left, so a key at its limit never takes the
--     place of a run that may start;
--   * each throttle key that granted is updated (its row locked) with the tokens it has left.
-- Expired leases are re-granted as before, whatever the limits: such a run never let its slots go.
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
                  r.delivery, due.prev_state, due.prev_owner, r.flow_throttle
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

-- A run that cannot enter its limits is cancelled and dead-lettered in one transaction (E_FLOW_KEY_INVALID: its
-- key cannot be computed; E_FLOW_KEYS_EXHAUSTED: a limit already has p_max_keys live keys; never a shared bucket).
create function automation.flow_dead_letter(p_run text, p_now timestamptz, p_code text, p_message text)
returns text
language plpgsql
as $$
declare
    c automation.runs;
    id text := 'dlq_' || replace(gen_random_uuid()::text, '-', '');
begin
    update automation.runs r
    set state = 'cancelled', next_wake_at = null, error_code = p_code, error_message = p_message,
        finished_at = p_now, updated_at = p_now, flow_keyed = true
    where r.run_id = p_run and r.state = 'pending' and r.lease_owner is null
    returning r.* into c;
    if c.run_id is null then
        return null;
    end if;
    insert into automation.run_events (run_id, project_id, at, kind, state, error_code, message, data)
    values (c.run_id, c.project_id, p_now, 'run.state', 'cancelled', p_code, p_message,
            jsonb_build_object('from', 'pending', 'reason', 'flow_key'));
    insert into automation.dead_letters (dead_letter_id, project_id, queue, trigger_id, workflow_id, event_id,
                                         envelope, envelope_bytes, error_code, error_message, attempts, created_at,
                                         run_id, version, partition_key, input, history, redrive_of)
    select id, c.project_id, coalesce(c.queue, 'q_default'), c.trigger_id, c.workflow_id, c.event_id,
           coalesce((select d.envelope from automation.dead_letters d where d.dead_letter_id = c.dead_letter_id),
                    (select e.envelope from automation.events e where e.event_id = c.event_id),
                    jsonb_build_object('id', coalesce(c.origin_run_id, c.run_id), 'type', 'run',
                                       'idempotency_key', c.idempotency_key, 'partition_key', c.partition_key,
                                       'occurred_at', c.created_at, 'attempt', 1, 'data', c.input,
                                       'trigger_id', c.trigger_id, 'workflow_id', c.workflow_id)::text),
           (select d.envelope_bytes from automation.dead_letters d where d.dead_letter_id = c.dead_letter_id),
           p_code, p_message, c.delivery - 1, p_now, c.run_id, c.version, c.partition_key, c.input,
           coalesce((select d.history from automation.dead_letters d where d.dead_letter_id = c.dead_letter_id),
                    '[]'::jsonb),
           c.dead_letter_id;
    return id;
end
$$;

-- The keyer's write for one run (runtime/engine/flow_keys.py), in one transaction with the run's row locked:
--   p_doc = {run_id, keys: [{key, limit_id, value, kind, max_n, per_ms, burst, hold}], invalid: "why" | null}
-- Returns 'keyed', 'skipped' (its rateLimit is used up: cancelled with E_FLOW_RATE_LIMITED, with why),
-- 'invalid' / 'exhausted' (dead-lettered), or 'gone' (keyed by another daemon, or no longer pending).
create function automation.flow_key_run(p_now timestamptz, p_doc jsonb, p_max_keys bigint)
returns text
language plpgsql
as $$
declare
    r automation.runs;
    k jsonb;
    fk automation.flow_keys;
    live bigint;
begin
    select * into r from automation.runs x where x.run_id = p_doc ->> 'run_id' for update;
    if r.run_id is null or r.flow_keyed is not false or r.state <> 'pending' then
        return 'gone';
    end if;
    if p_doc ->> 'invalid' is not null then
        perform automation.flow_dead_letter(r.run_id, p_now, 'E_FLOW_KEY_INVALID', p_doc ->> 'invalid');
        return 'invalid';
    end if;
    for k in select * from jsonb_array_elements(p_doc -> 'keys') loop
        select * into fk from automation.flow_keys f where f.project_id = r.project_id and f.key = k ->> 'key'
        for update;
        if fk.key is null then
            select l.live_keys into live from automation.flow_limit_keys l
            where l.project_id = r.project_id and l.limit_id = k ->> 'limit_id';
            if coalesce(live, 0) >= p_max_keys then
                perform automation.flow_dead_letter(r.run_id, p_now, 'E_FLOW_KEYS_EXHAUSTED',
                    'flow limit ' || (k ->> 'limit_id') || ' already has ' || live || ' live keys; new key '
                    || (k ->> 'key') || ' refused');
                return 'exhausted';
            end if;
            insert into automation.flow_keys (project_id, key, limit_id, value, kind, max_n, per_ms, burst, tokens,
                                              refilled_at, created_at, used_at)
            values (r.project_id, k ->> 'key', k ->> 'limit_id', k ->> 'value', k ->> 'kind', (k ->> 'max_n')::integer,
                    (k ->> 'per_ms')::bigint, (k ->> 'burst')::integer,
                    case k ->> 'kind' when 'throttle' then (k ->> 'burst')::double precision
                                      when 'rate' then 0 end,
                    case when k ->> 'kind' in ('throttle', 'rate') then p_now end, p_now, p_now)
            returning * into fk;
        else
            update automation.flow_keys f
            set max_n = (k ->> 'max_n')::integer, per_ms = (k ->> 'per_ms')::bigint, burst = (k ->> 'burst')::integer,
                used_at = p_now
            where f.project_id = fk.project_id and f.key = fk.key;
        end if;
        if fk.kind = 'rate' then
            if fk.refilled_at + make_interval(secs => fk.per_ms / 1000.0) <= p_now then
                fk.tokens := 0;
                fk.refilled_at := p_now;
            end if;
            if fk.tokens >= (k ->> 'max_n')::integer then
                update automation.runs x
                set state = 'cancelled', next_wake_at = null, error_code = 'E_FLOW_RATE_LIMITED',
                    error_message = 'skipped: rateLimit ' || fk.key || ' allows ' || (k ->> 'max_n') || ' per '
                                    || (fk.per_ms / 1000) || ' s; the window from '
                                    || to_char(fk.refilled_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
                                    || ' is used up',
                    finished_at = p_now, updated_at = p_now, flow_keyed = true
                where x.run_id = r.run_id;
                insert into automation.run_events (run_id, project_id, at, kind, state, error_code, message, data)
                select r.run_id, r.project_id, p_now, 'run.state', 'cancelled', 'E_FLOW_RATE_LIMITED', x.error_message,
                       jsonb_build_object('from', 'pending', 'reason', 'skipped', 'rate_key', fk.key)
                from automation.runs x where x.run_id = r.run_id;
                update automation.flow_keys f set tokens = fk.tokens, refilled_at = fk.refilled_at
                where f.project_id = fk.project_id and f.key = fk.key;
                update automation.flow_limit_keys l set skipped = l.skipped + 1
                where l.project_id = fk.project_id and l.limit_id = fk.limit_id;
                return 'skipped';
            end if;
            update automation.flow_keys f set tokens = fk.tokens + 1, refilled_at = fk.refilled_at
            where f.project_id = fk.project_id and f.key = fk.key;
        end if;
    end loop;
    update automation.runs x
    set flow_keyed = true,
        flow_keys = c.keys, flow_caps = c.caps, flow_hold = c.hold, flow_weights = c.weights,
        flow_holds = coalesce(c.any_hold, false),
        flow_throttle = (select e ->> 'key' from jsonb_array_elements(p_doc -> 'keys') e where e ->> 'kind' = 'throttle'
                         limit 1),
        flow_priority = (p_doc ->> 'priority')::smallint
    from (select array_agg(e ->> 'key' order by o) as keys,
                 array_agg(coalesce((e ->> 'max_n')::integer, 2147483647) order by o) as caps,
                 array_agg(coalesce((e ->> 'hold')::boolean, false) order by o) as hold,
                 array_agg(coalesce((e ->> 'weight')::double precision, (e ->> 'max_n')::double precision) order by o)
                     as weights,
                 bool_or((e ->> 'hold')::boolean) as any_hold
          from jsonb_array_elements(p_doc -> 'keys') with ordinality t(e, o)
          where e ->> 'kind' in ('concurrency', 'fairness')) c
    where x.run_id = r.run_id;
    return 'keyed';
end
$$;

-- Keys no run needs any more: no unfinished run names them and, for a throttle or rateLimit, their window is over.
create function automation.flow_keys_sweep(p_now timestamptz, p_idle interval, p_limit integer)
returns integer
language plpgsql
as $$
declare
    n integer;
begin
    delete from automation.flow_keys k
    where (k.project_id, k.key) in (
        select f.project_id, f.key from automation.flow_keys f
        where f.used_at < p_now - greatest(p_idle, coalesce(make_interval(secs => f.per_ms / 1000.0), p_idle))
          and not exists (select 1 from automation.runs r
                          where r.project_id = f.project_id and r.state not in ('succeeded', 'partial', 'failed',
                                                                                'compensation_failed', 'cancelled')
                            and r.flow_keys @> array[f.key])
          and not exists (select 1 from automation.runs r
                          where r.project_id = f.project_id and r.flow_throttle = f.key
                            and r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled'))
        order by f.used_at
        limit p_limit);
    get diagnostics n = row_count;
    return n;
end
$$;
