-- 0011_notifications: notification channels (declared objects a rule's `--notify NAME` names) and the durable
-- outbox of messages to them. An alert decides what to say and enqueues a row in the same transaction as its state
-- change; a delivery worker sends it, retrying with backoff. `idempotency_key` (one per alert state change and
-- channel) makes a second enqueue of the same message a no-op, so a crash between deciding and sending neither
-- loses nor doubles a message; the receiver gets the key too, to drop a repeat after a crash mid-send.
create table automation.notification_channels (
    project_id text        not null,
    name       text        not null,
    kind       text        not null check (kind in ('webhook', 'slack', 'email')),
    config     jsonb       not null,          -- where to send; secrets only by reference (secretRef), never values
    created_at timestamptz not null,
    updated_at timestamptz not null,
    constraint notification_channels_pkey primary key (project_id, name)
);

create table automation.notifications (
    id              bigint      generated always as identity,
    project_id      text        not null,
    channel         text        not null,
    idempotency_key text        not null,
    alert_id        text,                     -- the alert the message is about (null for a channel test)
    kind            text        not null check (kind in ('firing', 'update', 'escalation', 'resolved', 'test')),
    severity        text        not null check (severity in ('p1', 'p2', 'p3', 'p4')),
    payload         jsonb       not null,     -- what the alert says: workflow, run, step, error, next command...
    state           text        not null default 'pending'
                                check (state in ('pending', 'delivered', 'failed')),
    attempts        integer     not null default 0,
    next_attempt_at timestamptz not null,
    last_error      text,
    created_at      timestamptz not null,
    delivered_at    timestamptz,
    constraint notifications_pkey primary key (id),
    constraint notifications_key_unique unique (project_id, idempotency_key)
);
-- The delivery worker's claim: due messages only, so the index stays the size of the backlog, not of history.
create index notifications_due_idx on automation.notifications (next_attempt_at) where state = 'pending';
create index notifications_alert_idx on automation.notifications (alert_id, id) where alert_id is not null;
