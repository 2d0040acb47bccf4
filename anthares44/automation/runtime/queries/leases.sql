-- Leases (§7.2): granting runs to workers, renewing, releasing. A lease is (lease_owner, lease_grants): the
-- grant number fences every later write, so a worker whose lease was re-granted cannot write any more.

-- name: lease_claim_lock
-- purpose: serialise claims of every daemon (transaction advisory lock), so the next lease_claim statement counts the slots held with every earlier claim committed: queue and workflow limits hold across daemons (docs/queues.md)
select pg_advisory_xact_lock(hashtext('a44.automation.lease_claim'));

-- name: lease_claim
-- purpose: grant up to :limit due runs to worker :worker_id at instant :now for :lease within queue maxConcurrency, workflow concurrency.max and by-partition heads (skip locked), park non-head runs until :park_until, counting takeovers of expired leases, logging state changes (their NOTIFY deferred to the engine, 0006)
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
    where r.next_wake_at <= :now
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
    limit :limit * 4
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
    where r.run_id in (select run_id from pick order by next_wake_at limit :limit)
      and r.next_wake_at <= :now
      and r.state in ('pending', 'running', 'waiting', 'sleeping', 'compensating')
    for update skip locked
), parked as (      -- behind an unfinished run of their partition: out of the due set until it finishes
    update automation.runs r
    set next_wake_at = :park_until
    from (select x.run_id from automation.runs x
          where x.run_id in (select run_id from cand where blocked)
            and x.state = 'pending' and x.lease_owner is null and x.next_wake_at <= :now
          for update skip locked) b
    where r.run_id = b.run_id
), granted as (
    update automation.runs r
    set state = case when r.state = 'compensating' then 'compensating' else 'running' end,
        lease_owner = :worker_id, lease_deadline = :now + :lease::interval, next_wake_at = :now + :lease::interval,
        lease_grants = r.lease_grants + 1,
        lease_reclaims = r.lease_reclaims + (due.prev_owner is not null)::integer,
        started_at = coalesce(r.started_at, :now), updated_at = :now
    from due
    where r.run_id = due.run_id
    returning r.run_id, r.project_id, r.workflow_id, r.version, r.state, r.input, r.idempotency_key,
              r.trigger_id, r.event_id, r.partition_key, r.queue, r.epoch, r.current_step, r.failed_step,
              r.error_code, r.error_message, r.lease_grants, r.lease_reclaims, r.deadline_at, r.created_at,
              r.delivery, due.prev_state, due.prev_owner
), state_events as (
    insert into automation.run_events (run_id, project_id, at, kind, state, data)
    select run_id, project_id, :now, 'run.state', state,
           jsonb_build_object('from', prev_state, 'worker', :worker_id::text, 'grant', lease_grants)
    from granted
    where prev_state <> state
), reclaim_events as (
    insert into automation.run_events (run_id, project_id, at, kind, state, data)
    select run_id, project_id, :now, 'lease.reclaimed', state,
           jsonb_build_object('previous_owner', prev_owner, 'worker', :worker_id::text, 'grant', lease_grants)
    from granted
    where prev_owner is not null
)
select *, set_config('a44.notify', 'deferred', true) as notify from granted;

-- name: lease_renew
-- purpose: push the deadline of a lease still held by (:owner, grant :grant) to :deadline; no row = the lease was lost
update automation.runs
set lease_deadline = :deadline, next_wake_at = :deadline
where run_id = :run_id and lease_owner = :owner and lease_grants = :grant
returning run_id;

-- name: lease_release
-- purpose: hand a run back unfinished (shutdown): due again at :now, pending unless compensating; logs the state change
with prev as (
    select run_id, state from automation.runs
    where run_id = :run_id and lease_owner = :owner and lease_grants = :grant
    for update
), r as (
    update automation.runs r
    set state = case when prev.state = 'compensating' then 'compensating' else 'pending' end,
        lease_owner = null, lease_deadline = null, next_wake_at = :now, updated_at = :now
    from prev
    where r.run_id = prev.run_id
    returning r.run_id, r.project_id, r.state, prev.state as prev_state
)
insert into automation.run_events (run_id, project_id, at, kind, state, data)
select run_id, project_id, :now, 'run.state', state, jsonb_build_object('from', prev_state, 'reason', 'released')
from r
where prev_state <> state
returning run_id;

-- name: lease_next_due
-- purpose: the earliest instant a claimable run becomes due (runs_due_idx), to arm the daemon's timer
select min(next_wake_at)
from automation.runs
where next_wake_at is not null
  and state in ('pending', 'running', 'waiting', 'sleeping', 'compensating');

-- name: lease_reclaim_total
-- purpose: lease re-grants counted so far (§7.2, §16 lease_reclaim_total), over all runs of a project or of all projects
select coalesce(sum(lease_reclaims), 0)::bigint
from automation.runs
where (:project::text is null or project_id = :project);
