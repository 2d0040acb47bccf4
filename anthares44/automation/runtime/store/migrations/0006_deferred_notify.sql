-- 0006_deferred_notify: let the interpreter send its NOTIFYs after commit, in batches (docs/runtime.md,
-- "Performance"). A transaction that NOTIFYs takes a cluster-wide lock from just before its commit record until
-- the commit is flushed, so with fsync on such transactions commit one at a time: no group commit, a few hundred
-- commits/s on this hardware whatever the number of connections. The interpreter's step transactions mark
-- themselves with the transaction-local setting `a44.notify = 'deferred'` (set by `run_fence` and `lease_claim`,
-- no extra round trip); for them these triggers stay silent and the engine notifies the same channels itself
-- right after the commit, one statement for many runs. Every other writer (run creation, a person's
-- confirmation, shutdown releases, ingestion) notifies from the trigger exactly as before.

create or replace function automation.notify_run_event()
returns trigger
language plpgsql
as $$
begin
    if current_setting('a44.notify', true) is distinct from 'deferred' then
        perform pg_notify('a44_run_events', new.run_id);
    end if;
    return null;
end
$$;

create or replace function automation.notify_run_due()
returns trigger
language plpgsql
as $$
begin
    if new.next_wake_at is not null and new.lease_owner is null
       and (tg_op = 'INSERT' or new.next_wake_at is distinct from old.next_wake_at)
       and current_setting('a44.notify', true) is distinct from 'deferred' then
        perform pg_notify('a44_runs_due', (floor(extract(epoch from new.next_wake_at) * 1000))::bigint::text);
    end if;
    return null;
end
$$;
