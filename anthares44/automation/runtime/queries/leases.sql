-- Leases (§7.2): granting runs to workers, renewing, releasing. A lease is (lease_owner, lease_grants): the
-- grant number fences every later write, so a worker whose lease was re-granted cannot write any more.

-- name: lease_claim
-- purpose: grant up to $3 due runs to worker $1 at instant $2 for $4 (skip locked), counting takeovers of expired leases, logging state changes (their NOTIFY deferred to the engine, 0006)
with due as (
    select run_id, state as prev_state, lease_owner as prev_owner
    from automation.runs
    where next_wake_at <= $2
      and state in ('pending', 'running', 'waiting', 'sleeping', 'compensating')
    order by next_wake_at
    limit $3
    for update skip locked
), granted as (
    update automation.runs r
    set state = case when r.state = 'compensating' then 'compensating' else 'running' end,
        lease_owner = $1, lease_deadline = $2 + $4::interval, next_wake_at = $2 + $4::interval,
        lease_grants = r.lease_grants + 1,
        lease_reclaims = r.lease_reclaims + (due.prev_owner is not null)::integer,
        started_at = coalesce(r.started_at, $2), updated_at = $2
    from due
    where r.run_id = due.run_id
    returning r.run_id, r.project_id, r.workflow_id, r.version, r.state, r.input, r.idempotency_key,
              r.trigger_id, r.event_id, r.partition_key, r.queue, r.epoch, r.current_step, r.failed_step,
              r.error_code, r.error_message, r.lease_grants, r.lease_reclaims, r.deadline_at, r.created_at,
              due.prev_state, due.prev_owner
), state_events as (
    insert into automation.run_events (run_id, project_id, at, kind, state, data)
    select run_id, project_id, $2, 'run.state', state,
           jsonb_build_object('from', prev_state, 'worker', $1::text, 'grant', lease_grants)
    from granted
    where prev_state <> state
), reclaim_events as (
    insert into automation.run_events (run_id, project_id, at, kind, state, data)
    select run_id, project_id, $2, 'lease.reclaimed', state,
           jsonb_build_object('previous_owner', prev_owner, 'worker', $1::text, 'grant', lease_grants)
    from granted
    where prev_owner is not null
)
select *, set_config('a44.notify', 'deferred', true) as notify from granted;

-- name: lease_renew
-- purpose: push the deadline of a lease still held by ($2, grant $3) to $4; no row = the lease was lost
update automation.runs
set lease_deadline = $4, next_wake_at = $4
where run_id = $1 and lease_owner = $2 and lease_grants = $3
returning run_id;

-- name: lease_release
-- purpose: hand a run back unfinished (shutdown): due again at $4, pending unless compensating; logs the state change
with prev as (
    select run_id, state from automation.runs
    where run_id = $1 and lease_owner = $2 and lease_grants = $3
    for update
), r as (
    update automation.runs r
    set state = case when prev.state = 'compensating' then 'compensating' else 'pending' end,
        lease_owner = null, lease_deadline = null, next_wake_at = $4, updated_at = $4
    from prev
    where r.run_id = prev.run_id
    returning r.run_id, r.project_id, r.state, prev.state as prev_state
)
insert into automation.run_events (run_id, project_id, at, kind, state, data)
select run_id, project_id, $4, 'run.state', state, jsonb_build_object('from', prev_state, 'reason', 'released')
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
where ($1::text is null or project_id = $1);
