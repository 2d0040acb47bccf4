-- Circuit breakers of declared connectors (§14), shared by every daemon through these two tables
-- (migration 0005_connectors). Every instant comes from the caller's clock ($now), never from now().

-- name: breaker_state
-- purpose: the breaker row of one (project, connector); no row means closed
select state, opened_until, open_for_ms, probe_owner, probe_until
from automation.circuit_breakers
where project_id = $1 and connector_id = $2;

-- name: breaker_claim_probe
-- purpose: take the single probe of an open breaker whose openFor elapsed (or whose prober vanished); one winner
update automation.circuit_breakers
set state = 'half_open', probe_owner = $4, probe_until = $5, updated_at = $3
where project_id = $1 and connector_id = $2
  and ((state = 'open' and opened_until <= $3) or (state = 'half_open' and probe_until <= $3))
returning open_for_ms;

-- name: breaker_record
-- purpose: count one outcome in its one-second bucket, drop buckets older than the window, return the window sums
with ins as (
    insert into automation.circuit_samples as s (project_id, connector_id, bucket, ok, failed)
    values ($1, $2, $3, $4, $5)
    on conflict (project_id, connector_id, bucket)
    do update set ok = s.ok + excluded.ok, failed = s.failed + excluded.failed
    returning ok, failed
), del as (
    delete from automation.circuit_samples
    where project_id = $1 and connector_id = $2 and bucket < $6
)
select coalesce(sum(s.ok) filter (where s.bucket <> $3), 0)::bigint + (select ok from ins) as ok,
       coalesce(sum(s.failed) filter (where s.bucket <> $3), 0)::bigint + (select failed from ins) as failed
from automation.circuit_samples s
where s.project_id = $1 and s.connector_id = $2 and s.bucket >= $6;

-- name: breaker_open
-- purpose: open a closed breaker for open_for_ms; an open or probing breaker is left as it is
insert into automation.circuit_breakers as b
    (project_id, connector_id, state, opened_until, open_for_ms, opened_count, updated_at)
values ($1, $2, 'open', $3::timestamptz + $4::integer * interval '1 millisecond', $4, 1, $3)
on conflict (project_id, connector_id) do update
set state = 'open', opened_until = excluded.opened_until, open_for_ms = excluded.open_for_ms,
    probe_owner = null, probe_until = null, opened_count = b.opened_count + 1, updated_at = excluded.updated_at
where b.state = 'closed'
returning opened_until;

-- name: breaker_probe_failed
-- purpose: the probe failed: open again for twice the last period (at least openFor, at most $5 ms)
update automation.circuit_breakers
set state = 'open',
    open_for_ms = least(greatest(open_for_ms * 2, $4), $5),
    opened_until = $3::timestamptz + least(greatest(open_for_ms * 2, $4), $5) * interval '1 millisecond',
    probe_owner = null, probe_until = null, opened_count = opened_count + 1, updated_at = $3
where project_id = $1 and connector_id = $2 and state = 'half_open' and probe_owner = $6
returning opened_until, open_for_ms;

-- name: breaker_probe_succeeded
-- purpose: the probe succeeded: close the breaker and forget the samples that opened it
with closed as (
    update automation.circuit_breakers
    set state = 'closed', opened_until = null, open_for_ms = 0, probe_owner = null, probe_until = null,
        updated_at = $3
    where project_id = $1 and connector_id = $2 and state = 'half_open' and probe_owner = $4
    returning project_id
)
delete from automation.circuit_samples
where project_id = $1 and connector_id = $2 and exists (select 1 from closed);
