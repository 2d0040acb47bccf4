-- 0009_tracing: what OpenTelemetry traces need (docs/observability.md). The W3C `traceparent` a client sent with
-- the request that created a run, keyed by the run's idempotency key (written just before the run is created, so a
-- run never becomes claimable without it, without touching the run-creation statements); and, on every lease
-- grant, the instant the run was due and the instant it was granted, for the trace's lease-grant span.
create table automation.run_trace_context (
    project_id text not null,
    run_key text not null,
    at timestamp with time zone not null,
    traceparent text not null,
    tracestate text,
    primary key (project_id, run_key)
);

alter table automation.runs add column grant_due_at timestamp with time zone,
                            add column granted_at timestamp with time zone;

-- fires on grants only (the WHEN is evaluated without calling the function), so other updates pay nothing
create function automation.note_grant() returns trigger language plpgsql as $$
begin
    new.grant_due_at := old.next_wake_at;
    new.granted_at := new.updated_at;
    return new;
end $$;

create trigger runs_note_grant before update of lease_grants on automation.runs
for each row when (new.lease_grants is distinct from old.lease_grants) execute function automation.note_grant();
