-- The ingestion plane (§8, §9): published triggers, webhook secrets, event envelopes, deliveries.

-- name: trigger_upsert
-- purpose: store a published trigger (standalone or inline), replacing an earlier publication of the same id
insert into automation.triggers (project_id, trigger_id, type, workflow_id, event, ir, origin, active, published_at,
                                 updated_at)
values ($1, $2, $3, $4, $5, $6::jsonb, $7, true, $8, $8)
on conflict (project_id, trigger_id) do update
    set type = excluded.type, workflow_id = excluded.workflow_id, event = excluded.event, ir = excluded.ir,
        origin = excluded.origin, active = true, updated_at = excluded.updated_at
returning (xmax = 0) as inserted;

-- name: trigger_get
-- purpose: one trigger of a project
select project_id, trigger_id, type, workflow_id, event, ir, origin, active, published_at, updated_at
from automation.triggers where project_id = $1 and trigger_id = $2;

-- name: triggers_list
-- purpose: the triggers of a project, optionally of one type
select project_id, trigger_id, type, workflow_id, event, ir, origin, active, published_at, updated_at
from automation.triggers
where project_id = $1 and ($2::text is null or type = $2)
order by trigger_id;

-- name: triggers_for_event
-- purpose: active event triggers subscribed to an event type, with the latest version of their workflow
select t.trigger_id, t.workflow_id, t.ir, v.version, v.ir as workflow_ir
from automation.triggers t
left join lateral (
    select version, ir from automation.workflow_versions w
    where w.project_id = t.project_id and w.workflow_id = t.workflow_id
    order by version desc limit 1
) v on true
where t.project_id = $1 and t.event = $2 and t.active and t.type = 'event'
order by t.trigger_id;

-- name: webhook_secret_insert
-- purpose: add a secret to a webhook trigger (publish, first use or rotation)
insert into automation.webhook_secrets (secret_id, project_id, trigger_id, secret, created_at, expires_at,
                                        revealed_at)
values ($1, $2, $3, $4, $5, null, $6);

-- name: webhook_secret_count
-- purpose: how many secrets of a webhook trigger are still valid at $3
select count(*) from automation.webhook_secrets
where project_id = $1 and trigger_id = $2 and (expires_at is null or expires_at > $3);

-- name: webhook_secret_current
-- purpose: the newest secret of a webhook trigger still valid at $3 (the one senders should use)
select secret_id, secret, created_at, expires_at, revealed_at from automation.webhook_secrets
where project_id = $1 and trigger_id = $2 and (expires_at is null or expires_at > $3)
order by created_at desc, secret_id desc
limit 1;

-- name: webhook_secret_reveal
-- purpose: mark a secret as shown; returns nothing when it was shown already (secrets are shown once)
update automation.webhook_secrets set revealed_at = $2
where secret_id = $1 and revealed_at is null
returning secret;

-- name: webhook_secrets_expire
-- purpose: rotation: every current secret of a trigger stays valid until $3 (now + 48 h) and no longer
update automation.webhook_secrets set expires_at = $3
where project_id = $1 and trigger_id = $2 and (expires_at is null or expires_at > $3);

-- name: webhook_secrets_list
-- purpose: the secrets of a webhook trigger with their validity, without the secret text
select secret_id, created_at, expires_at, revealed_at from automation.webhook_secrets
where project_id = $1 and trigger_id = $2
order by created_at desc;

-- name: event_key_claim
-- purpose: claim a bus event's idempotency key (recycling one older than the window); returns the event id if claimed
insert into automation.event_keys as k (project_id, key, event_id, created_at)
values ($1, $2, $3, $4)
on conflict (project_id, key) do update
    set event_id = excluded.event_id, created_at = excluded.created_at
    where k.created_at <= excluded.created_at - $5::interval
returning event_id;

-- name: event_key_get
-- purpose: the event that holds a bus idempotency key and since when
select event_id, created_at from automation.event_keys where project_id = $1 and key = $2;

-- name: event_insert
-- purpose: persist an event envelope (the JSON text byte for byte)
insert into automation.events (event_id, project_id, type, idempotency_key, partition_key, trigger_id, source,
                               occurred_at, received_at, envelope)
values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10);

-- name: event_get
-- purpose: one event envelope of a project
select event_id, project_id, type, idempotency_key, partition_key, trigger_id, source, occurred_at, received_at,
       envelope
from automation.events where event_id = $1 and project_id = $2;

-- name: events_list
-- purpose: a project's events newest first, optionally of one type
select event_id, project_id, type, idempotency_key, partition_key, trigger_id, source, occurred_at, received_at
from automation.events
where project_id = $1 and ($2::text is null or type = $2)
order by received_at desc, event_id desc
limit $3 offset $4;

-- name: event_delivery_insert
-- purpose: record what an event became for one subscribed trigger
insert into automation.event_deliveries (event_id, trigger_id, project_id, outcome, run_id, at)
values ($1, $2, $3, $4, $5, $6)
on conflict (event_id, trigger_id) do nothing;

-- name: event_deliveries_list
-- purpose: what an event became for each subscribed trigger
select trigger_id, outcome, run_id, at from automation.event_deliveries
where event_id = $1 order by trigger_id;

-- name: ingestion_row_counts
-- purpose: rows in the tables a webhook or API request may write (tests: a rejected request writes nothing)
select (select count(*) from automation.runs) as runs,
       (select count(*) from automation.events) as events,
       (select count(*) from automation.idempotency_keys) as idempotency_keys,
       (select count(*) from automation.event_keys) as event_keys,
       (select count(*) from automation.event_deliveries) as deliveries,
       (select count(*) from automation.dead_letters) as dead_letters,
       (select count(*) from automation.run_events) as run_events,
       (select count(*) from automation.workflow_versions) as workflow_versions,
       (select count(*) from automation.triggers) as triggers,
       (select count(*) from automation.webhook_secrets) as webhook_secrets,
       (select count(*) from automation.api_tokens) as api_tokens;

-- name: webhook_target
-- purpose: what the webhook endpoint caches for a few seconds per trigger: the trigger row (updated_at is its
-- version stamp), every secret still valid at $3 with its expiry (the newest first), and the workflow's latest
-- version; `webhook_ingest` re-checks the trigger stamp and the version, so a stale entry never writes
select t.trigger_id, t.workflow_id, t.updated_at,
       coalesce((select array_agg(s.secret order by s.created_at desc, s.secret_id desc)
                 from automation.webhook_secrets s
                 where s.project_id = t.project_id and s.trigger_id = t.trigger_id
                   and (s.expires_at is null or s.expires_at > $3)), '{}') as secrets,
       coalesce((select array_agg(s.expires_at order by s.created_at desc, s.secret_id desc)
                 from automation.webhook_secrets s
                 where s.project_id = t.project_id and s.trigger_id = t.trigger_id
                   and (s.expires_at is null or s.expires_at > $3)), '{}') as secret_expiries,
       v.version, v.ir as workflow_ir
from automation.triggers t
left join lateral (
    select version, ir from automation.workflow_versions w
    where w.project_id = t.project_id and w.workflow_id = t.workflow_id
    order by version desc limit 1
) v on true
where t.project_id = $1 and t.trigger_id = $2 and t.type = 'webhook' and t.active;

-- name: webhook_ingest
-- purpose: one accepted webhook in one statement (one round trip; the group committer sends many in one
-- transaction): re-check that the cached trigger ($7, stamp $16) is still the active webhook trigger of workflow
-- $2, that the secret $18 that verified the signature is still valid at $10, and that $3 is still the latest
-- version (else nothing is written and the caller starts over from a fresh read); then create the run with
-- run_create's own text (fragment run_create_rows: claim the key $6 within the window $11, insert the pending run,
-- log run.created) and persist the envelope ($13, text $17) -- all only when the key was claimed. Returns the
-- holder of the key as seen at the statement's start for the deduplicated answer.
with t as (
    select 1 as ok from automation.triggers
    where project_id = $1 and trigger_id = $7 and type = 'webhook' and active and workflow_id = $2
      and updated_at = $16
      and exists (select 1 from automation.webhook_secrets s
                  where s.project_id = $1 and s.trigger_id = $7 and s.secret = $18
                    and (s.expires_at is null or s.expires_at > $10))
), v as (
    select version from automation.workflow_versions
    where project_id = $1 and workflow_id = $2
    order by version desc
    limit 1
), target as (
    select v.version from v, t where v.version = $3
), held as (
    select run_id, created_at from automation.idempotency_keys where project_id = $1 and key = $6
),
-- include: run_create_rows
, envelope as (
    insert into automation.events (event_id, project_id, type, idempotency_key, partition_key, trigger_id, source,
                                   occurred_at, received_at, envelope)
    select $13, $1, $14, $15, $8, $7, 'webhook', $10, $10, $17
    from run
)
select exists (select 1 from t) as trigger_current, (select version from v) as latest_version,
       (select run_id from run) as created_run_id, (select run_id from held) as held_run_id,
       (select created_at from held) as held_at;
