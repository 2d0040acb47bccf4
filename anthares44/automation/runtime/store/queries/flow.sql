-- Paused flow keys (§22, docs/flow.md), shared by every daemon through automation.flow_pauses (migration
-- 0032_flow_pauses). Every instant comes from the caller's clock (:now), never from now().

-- name: flow_paused_until
-- purpose: the end of a key's pause when the key is paused at :now (no row: not paused)
select paused_until
from automation.flow_pauses
where project_id = :project_id and key = :key and paused_until > :now;

-- name: flow_pause_upstream
-- purpose: the far side asked to slow down: pause the key until at least :until (a longer pause in place is kept); the pause's end
insert into automation.flow_pauses as p
    (project_id, key, paused_until, source, reason, paused_at, updated_at)
values (:project_id, :key, :until, 'upstream', :reason, :now, :now)
on conflict (project_id, key) do update
set paused_until = greatest(p.paused_until, excluded.paused_until),
    source = case when p.paused_until >= excluded.paused_until then p.source else 'upstream' end,
    reason = case when p.paused_until >= excluded.paused_until then p.reason else excluded.reason end,
    paused_by = case when p.paused_until >= excluded.paused_until then p.paused_by end,
    paused_at = case when p.paused_until > :now then p.paused_at else excluded.paused_at end,
    paused_count = p.paused_count + case when p.paused_until > :now then 0 else 1 end,
    resumed_by = null, updated_at = excluded.updated_at
returning paused_until;

-- name: flow_pause_operator
-- purpose: an operator pauses the key until :until (longer or shorter than a pause in place); the key's row
insert into automation.flow_pauses as p
    (project_id, key, paused_until, source, reason, paused_by, paused_at, updated_at)
values (:project_id, :key, :until, 'operator', :reason, :who, :now, :now)
on conflict (project_id, key) do update
set paused_until = excluded.paused_until, source = 'operator', reason = excluded.reason,
    paused_by = excluded.paused_by, resumed_by = null,
    paused_at = case when p.paused_until > :now then p.paused_at else excluded.paused_at end,
    paused_count = p.paused_count + case when p.paused_until > :now then 0 else 1 end,
    updated_at = excluded.updated_at
returning key, paused_until, source, reason, paused_by, paused_at, paused_count;

-- name: flow_resume
-- purpose: end a key's pause at :now, by hand; the key's row, none when it was not paused
update automation.flow_pauses
set paused_until = :now, resumed_by = :who, updated_at = :now
where project_id = :project_id and key = :key and paused_until > :now
returning key, paused_until, source, reason, paused_by, paused_at, paused_count;

-- name: flow_wake
-- purpose: runs released until a key's pause ends that should go at :at instead (resumed or shortened): their waiting attempt's due time and their wake-up move to :at; how many runs
with waiting as (
    select r.run_id
    from automation.runs r
    where r.project_id = :project_id and r.state = 'waiting' and r.next_wake_at > :at
), moved as (
    update automation.step_attempts a
    set retry_at = :at
    from waiting w
    where a.run_id = w.run_id and a.status = 'failed' and a.error_code = 'E_UPSTREAM_429' and a.retry_at > :at
      and position(:marker in a.error_message) > 0
    returning a.run_id
), woken as (
    update automation.runs r
    set next_wake_at = :at
    where r.run_id in (select run_id from moved) and r.state = 'waiting' and r.next_wake_at > :at
    returning r.run_id
)
select count(*)::bigint from woken;

-- name: flow_list
-- purpose: the keys of a project paused at :now, the soonest to end first
select key, paused_until, source, reason, paused_by, paused_at, paused_count
from automation.flow_pauses
where project_id = :project_id and paused_until > :now
order by paused_until, key;
