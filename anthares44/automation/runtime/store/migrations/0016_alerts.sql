-- 0016_alerts: alert rules, the metric samples they are evaluated on, the alerts they raise with their history,
-- and the lease of the one evaluator across daemons (docs/alerts.md). An alert's state change and the
-- notifications it enqueues (automation.notifications, 0011) commit in one transaction.
create table automation.alert_rules (
    project_id        text        not null,
    name              text        not null,
    metric            text        not null,     -- automation.dlq_depth, ...; `builtin` routes the built-in alerts
    filter            text        not null default '',
    condition         text        not null default '',
    severity          text        not null check (severity in ('p1', 'p2', 'p3', 'p4')),
    notify            text,                     -- channel name; null: recorded, counted and logged only
    escalate_to       text,
    suppress_window_s float8      not null check (suppress_window_s > 0),
    update_every      integer     not null check (update_every > 0),
    origin            text        not null check (origin in ('cli', 'yaml')),
    created_at        timestamptz not null,
    updated_at        timestamptz not null,
    constraint alert_rules_pkey primary key (project_id, name)
);

-- A few series per project and queue every interval, pruned by time: the table stays the size of the longest
-- window a rule may name times the series.
create table automation.alert_samples (
    project_id text        not null,
    metric     text        not null,
    labels     jsonb       not null,
    at         timestamptz not null,
    value      float8      not null
);
create index alert_samples_series_idx on automation.alert_samples (project_id, metric, at);
create index alert_samples_at_idx on automation.alert_samples (at);

create table automation.alerts (
    alert_id    text        not null,
    project_id  text        not null,
    rule        text        not null,   -- a rule's name, or builtin:run_failed | builtin:compensation_failed | ...
    group_key   text        not null,   -- what repeats collapse on: workflow + error code, a series' labels, a queue
    state       text        not null check (state in ('firing', 'resolved')),
    severity    text        not null check (severity in ('p1', 'p2', 'p3', 'p4')),
    machine     jsonb       not null,   -- the suppression state (runtime/alerts/suppression.py)
    context     jsonb       not null,   -- what the messages say: workflow, run, steps, error, next command...
    opened_at   timestamptz not null,
    updated_at  timestamptz not null,
    resolved_at timestamptz,
    constraint alerts_pkey primary key (alert_id)
);
-- At most one firing alert per rule and group: a second evaluator that raced past the lease cannot open another.
create unique index alerts_firing_idx on automation.alerts (project_id, rule, group_key) where state = 'firing';
create index alerts_project_idx on automation.alerts (project_id, opened_at desc);

-- Transitions and the messages they sent, never one row per occurrence.
create table automation.alert_history (
    id       bigint      generated always as identity,
    alert_id text        not null,
    at       timestamptz not null,
    kind     text        not null,      -- firing | update | escalation | resolved
    count    integer     not null,      -- occurrences so far
    channels text[]      not null,      -- where it was enqueued (empty: no channel, logged only)
    constraint alert_history_pkey primary key (id)
);
create index alert_history_alert_idx on automation.alert_history (alert_id, id);

-- The one evaluator: the daemon holding this row's unexpired lease samples and evaluates; `event_horizon` is the
-- run event id below which every run outcome has been turned into an alert (later ones are deduplicated by
-- alert_seen, so one committed late with a lower id is not skipped).
create table automation.alert_evaluator (
    singleton     boolean     not null default true check (singleton),
    holder        text        not null,
    expires_at    timestamptz not null,
    event_horizon bigint      not null default 0,
    constraint alert_evaluator_pkey primary key (singleton)
);

create table automation.alert_seen (
    event_id bigint not null,
    constraint alert_seen_pkey primary key (event_id)
);

-- The run outcomes the built-in alerts read, without scanning the whole event log.
create index run_events_outcome_idx on automation.run_events (id)
    where kind = 'run.state' and state in ('failed', 'compensation_failed', 'awaiting_confirmation', 'succeeded');
