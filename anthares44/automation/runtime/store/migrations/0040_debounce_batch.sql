-- 0040_debounce_batch: debounce and batch buffers (§22, docs/flow.md "Debounce and batch"). An event delivered to
-- a workflow that declares `debounce` or `batch` creates no run of its own: it joins the open buffer of its key,
-- and the run started when the buffer flushes carries it.
--
-- flow_buffers: one row per buffer; at most one `open` buffer per (project, workflow, key) (the partial unique
-- index every ingestion upserts on, which takes the buffer's row lock). A flush is one conditional transition
-- `open` -> `flushed` (`where state = 'open'`), in the same transaction as the run it starts, so a buffer is flushed
-- once whatever the number of daemons, and an event is in exactly one run.
--   kind          debounce | batch
--   buffer_key    the value of the workflow's `key` expression over the event ('' without one)
--   deliver       what the run gets: last | first (one event's data) | all (every envelope; a batch is `all`),
--                 fixed when the buffer opens, as are `queue` and `partition_key` (the first event's), so a republish never changes an open buffer's answer
--   first_at      when the first event joined (the engine's clock), last_at the latest
--   due_at        when the flusher closes it: debounce least(last_at + quiet, first_at + maxWait), batch
--                 first_at + maxWait
--   max_due_at    first_at + maxWait: a flush at due_at = max_due_at has reason maxWait, else quiet
--   events, bytes how many envelopes, how many bytes of envelope JSON it holds
--   flush_reason  quiet | maxWait | maxSize | maxBytes, run_id the run it started
-- flow_buffer_events: the envelopes a buffer holds, each once per workflow (an event is in one buffer).
-- flow_buffer_keys: the idempotency keys of webhook requests that were buffered (`<trigger>:<key>`, 24 h window as
-- automation.idempotency_keys): a repeat is answered with the buffer it joined, never buffered twice.
create table automation.flow_buffers (
    buffer_id    text        primary key check (buffer_id like 'fb\_%'),
    project_id   text        not null,
    workflow_id  text        not null,
    kind         text        not null check (kind in ('debounce', 'batch')),
    buffer_key   text        not null,
    deliver      text        not null check (deliver in ('last', 'first', 'all')),
    queue        text,
    partition_key text,
    state        text        not null default 'open' check (state in ('open', 'flushed')),
    first_at     timestamptz not null,
    last_at      timestamptz not null,
    due_at       timestamptz not null,
    max_due_at   timestamptz not null,
    events       integer     not null default 0,
    bytes        bigint      not null default 0,
    flushed_at   timestamptz,
    flush_reason text        check (flush_reason in ('quiet', 'maxWait', 'maxSize', 'maxBytes')),
    run_id       text,
    check ((state = 'open') = (flushed_at is null))
);
create unique index flow_buffers_open on automation.flow_buffers (project_id, workflow_id, kind, buffer_key)
    where state = 'open';
create index flow_buffers_due on automation.flow_buffers (due_at) where state = 'open';
create index flow_buffers_run on automation.flow_buffers (run_id) where run_id is not null;

create table automation.flow_buffer_events (
    buffer_id   text        not null references automation.flow_buffers (buffer_id) on delete cascade,
    project_id  text        not null,
    workflow_id text        not null,
    event_id    text        not null,
    trigger_id  text,
    seq         bigint      generated always as identity,
    occurred_at timestamptz not null,
    received_at timestamptz not null,
    bytes       integer     not null,
    envelope    jsonb       not null,
    primary key (buffer_id, event_id),
    unique (project_id, workflow_id, event_id)
);

create table automation.flow_buffer_keys (
    project_id text        not null,
    key        text        not null,
    buffer_id  text        not null,
    event_id   text        not null,
    created_at timestamptz not null,
    primary key (project_id, key)
);

-- a delivery that joined a buffer: `buffered`, its run_id filled in by the flush
alter table automation.event_deliveries drop constraint event_deliveries_outcome_check;
alter table automation.event_deliveries add constraint event_deliveries_outcome_check
    check (outcome in ('created', 'deduplicated', 'filtered', 'dead_lettered', 'buffered'));
