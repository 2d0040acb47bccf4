-- Leases (§7.2): granting runs to workers, renewing, releasing. A lease is (lease_owner, lease_grants): the
-- grant number fences every later write, so a worker whose lease was re-granted cannot write any more.

-- name: lease_claim
-- purpose: grant up to :limit due runs to worker :worker_id at instant :now for :lease, in one statement: the claim lock, queue/workflow concurrency, by-partition heads (parking the others until :park_until), reclaim counting, state events (automation.lease_claim, 0022)
select * from automation.lease_claim(:worker_id, :now, :limit, :lease, :park_until);

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
