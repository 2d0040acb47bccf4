-- 0005_connectors: circuit breakers shared by every daemon (§14, docs/connectors.md "Circuit breaker").

-- One row per (project, declared connector) whose breaker has ever opened or been probed. Absent = closed.
--   state        closed | open | half_open (one probe request is in flight)
--   opened_until while open: when the next probe may go
--   open_for_ms  how long the last opening lasts; doubled after a failed probe, capped at 5 minutes
--   probe_owner  the token of the attempt that claimed the probe; probe_until: after it the claim is stale
--                (the prober died) and another attempt may claim the probe
create table automation.circuit_breakers (
    project_id   text        not null,
    connector_id text        not null,
    state        text        not null default 'closed' check (state in ('closed', 'open', 'half_open')),
    opened_until timestamptz,
    open_for_ms  integer     not null default 0,
    probe_owner  text,
    probe_until  timestamptz,
    opened_count integer     not null default 0,
    updated_at   timestamptz not null,
    primary key (project_id, connector_id)
);

-- Outcomes of requests through a breaker, counted per one-second bucket: the error rate over the window is the
-- sum of the buckets inside it. Buckets older than the window are deleted as outcomes are recorded.
create table automation.circuit_samples (
    project_id   text        not null,
    connector_id text        not null,
    bucket       timestamptz not null,
    ok           integer     not null default 0,
    failed       integer     not null default 0,
    primary key (project_id, connector_id, bucket)
);
