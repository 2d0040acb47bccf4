-- Circuit breakers of declared connectors (§14), shared by every daemon through these two tables
-- (migration 0005_connectors). Every instant comes from the caller's clock ($now), never from now().

-- name: breaker_state
-- purpose: the breaker row of one (project, connector); no row means closed
select state, opened_until, open_for_ms, probe_owner, probe_until
from automation.circuit_breakers
where project_id = :project_id and connector_id = :connector_id;

-- name: breaker_claim_probe
-- purpose: take the single probe of an open breaker whose openFor elapsed (or whose prober vanished); one winner
update automation.circuit_breakers
set state = 'half_open', probe_owner = :token, probe_until = :until, updated_at = :now
where project_id = :project_id and connector_id = :connector_id
  and ((state = 'open' and opened_until <= :now) or (state = 'half_open' and probe_until <= :now))
returning open_for_ms;

-- name: breaker_record
-- purpose: count one outcome in its one-second bucket, drop buckets older than the window, return the window sums
with ins as (
    insert into automation.circuit_samples as s (project_id, connector_id, bucket, ok, failed)
    values (:project_id, :connector_id, :bucket, :ok, :failed)
    on conflict (project_id, connector_id, bucket)
    do update set ok = s.ok + excluded.ok, failed = s.failed + excluded.failed
    returning ok, failed
), del as (
    delete from automation.circuit_samples
    where project_id = :project_id and connector_id = :connector_id and bucket < :since
)
select coalesce(sum(s.ok) filter (where s.bucket <> :bucket), 0)::bigint + (select ok from ins) as ok,
       coalesce(sum(s.failed) filter (where s.bucket <> :bucket), 0)::bigint + (select failed from ins) as failed
from automation.circuit_samples s
where s.project_id = :project_id and s.connector_id = :connector_id and s.bucket >= :since;

-- name: breaker_open
-- purpose: open a closed breaker for open_for_ms; an open or probing breaker is left as it is
insert into automation.circuit_breakers as b
    (project_id, connector_id, state, opened_until, open_for_ms, opened_count, updated_at)
values (:project_id, :connector_id, 'open', :now::timestamptz + :open_for_ms::integer * interval '1 millisecond', :open_for_ms, 1, :now)
on conflict (project_id, connector_id) do update
set state = 'open', opened_until = excluded.opened_until, open_for_ms = excluded.open_for_ms,
    probe_owner = null, probe_until = null, opened_count = b.opened_count + 1, updated_at = excluded.updated_at
where b.state = 'closed'
returning opened_until;

-- name: breaker_probe_failed
-- purpose: the probe failed: open again for twice the last period (at least openFor, at most :max_open_ms ms)
update automation.circuit_breakers
set state = 'open',
    open_for_ms = least(greatest(open_for_ms * 2, :open_for_ms), :max_open_ms),
    opened_until = :now::timestamptz + least(greatest(open_for_ms * 2, :open_for_ms), :max_open_ms) * interval '1 millisecond',
    probe_owner = null, probe_until = null, opened_count = opened_count + 1, updated_at = :now
where project_id = :project_id and connector_id = :connector_id and state = 'half_open' and probe_owner = :token
returning opened_until, open_for_ms;

-- name: breaker_probe_succeeded
-- purpose: the probe succeeded: close the breaker and forget the samples that opened it
with closed as (
    update automation.circuit_breakers
    set state = 'closed', opened_until = null, open_for_ms = 0, probe_owner = null, probe_until = null,
        updated_at = :now
    where project_id = :project_id and connector_id = :connector_id and state = 'half_open' and probe_owner = :token
    returning project_id
)
delete from automation.circuit_samples
where project_id = :project_id and connector_id = :connector_id and exists (select 1 from closed);
