-- 0003_ingestion: the ingestion plane (SPEC §7.1, §8, §9, §17): published triggers, webhook secrets, event
-- envelopes and their per-trigger deliveries, a minimal dead-letter table, and API tokens.

-- Every published trigger, standalone (trigger files) or inline (a workflow's `triggers`), by id within a project.
-- `ir` is the TriggerIR as JSON (docs/ir.md). Publishing a trigger again replaces its row; the scheduler (§11)
-- reads the `schedule` ones, the bus the `event` ones (by `event` type), the webhook endpoint the `webhook` ones.
create table automation.triggers (
    project_id   text        not null,
    trigger_id   text        not null,
    type         text        not null,
    workflow_id  text        not null,
    event        text,                                  -- event type (event triggers)
    ir           jsonb       not null,
    origin       text        not null default 'standalone',
    active       boolean     not null default true,
    published_at timestamptz not null,
    updated_at   timestamptz not null,
    constraint triggers_pkey primary key (project_id, trigger_id),
    constraint triggers_type_check check (type in ('event', 'webhook', 'schedule', 'manual')),
    constraint triggers_origin_check check (origin in ('standalone', 'inline'))
);
create index triggers_event_idx on automation.triggers (project_id, event) where active and type = 'event';
create index triggers_type_idx on automation.triggers (type) where active;

-- Webhook secrets (§9). The HMAC key is the secret string itself, so it is kept as shown (it must verify).
-- `expires_at` null = current; rotation sets the previous ones to now + 48 h. `revealed_at`: shown once.
create table automation.webhook_secrets (
    secret_id    text        not null,
    project_id   text        not null,
    trigger_id   text        not null,
    secret       text        not null,
    created_at   timestamptz not null,
    expires_at   timestamptz,
    revealed_at  timestamptz,
    constraint webhook_secrets_pkey primary key (secret_id),
    constraint webhook_secrets_trigger_fkey foreign key (project_id, trigger_id)
        references automation.triggers (project_id, trigger_id) on delete cascade
);
create index webhook_secrets_trigger_idx on automation.webhook_secrets (project_id, trigger_id, created_at desc);

-- Event envelopes (§8.1) as received: `envelope` is the JSON text byte for byte (bus events and webhooks).
create table automation.events (
    event_id        text        not null,
    project_id      text        not null,
    type            text        not null,
    idempotency_key text        not null,
    partition_key   text,
    trigger_id      text,                               -- webhook envelopes: the webhook trigger
    source          text        not null,
    occurred_at     timestamptz not null,
    received_at     timestamptz not null,
    envelope        text        not null,
    constraint events_pkey primary key (event_id),
    constraint events_source_check check (source in ('bus', 'webhook'))
);
create index events_project_received_idx on automation.events (project_id, received_at desc);
create index events_project_type_idx on automation.events (project_id, type, received_at desc);

-- §8.2 for bus events: one row per (project, key); a key older than 24 h is recycled by overwriting its row.
create table automation.event_keys (
    project_id text        not null,
    key        text        not null,
    event_id   text        not null,
    created_at timestamptz not null,
    constraint event_keys_pkey primary key (project_id, key)
);
create index event_keys_created_idx on automation.event_keys (created_at);

-- What happened to an event for each subscribed trigger: a run (created or deduplicated), a kept filter miss
-- (dropOnFilterMiss: false) or a dead letter (E_EVENT_TOO_OLD). Dropped filter misses only count.
create table automation.event_deliveries (
    event_id   text        not null,
    trigger_id text        not null,
    project_id text        not null,
    outcome    text        not null,
    run_id     text,
    at         timestamptz not null,
    constraint event_deliveries_pkey primary key (event_id, trigger_id),
    constraint event_deliveries_outcome_check check (outcome in ('created', 'deduplicated', 'filtered',
        'dead_lettered'))
);

-- Minimal dead-letter queue (§10.3); the queues issue extends it. The envelope is kept byte for byte.
create table automation.dead_letters (
    dead_letter_id text        not null,
    project_id     text        not null,
    queue          text,
    trigger_id     text,
    workflow_id    text,
    event_id       text,
    envelope       text        not null,
    error_code     text        not null,
    error_message  text,
    attempts       integer     not null default 0,
    created_at     timestamptz not null,
    constraint dead_letters_pkey primary key (dead_letter_id)
);
create index dead_letters_project_idx on automation.dead_letters (project_id, created_at desc);

-- API tokens (§17): only the sha256 of the token is stored. `scopes` like {automation:write}; `allow_cidrs`
-- empty = any address.
create table automation.api_tokens (
    token_id     text        not null,
    project_id   text        not null,
    name         text        not null,
    token_sha256 text        not null,
    scopes       text[]      not null,
    allow_cidrs  cidr[]      not null default '{}',
    created_at   timestamptz not null,
    expires_at   timestamptz,
    revoked_at   timestamptz,
    last_used_at timestamptz,
    constraint api_tokens_pkey primary key (token_id),
    constraint api_tokens_sha256_key unique (token_sha256)
);
