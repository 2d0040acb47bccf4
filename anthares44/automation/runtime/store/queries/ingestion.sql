-- The ingestion plane (§8, §9): published triggers, webhook secrets, event envelopes, deliveries.

-- name: trigger_upsert
-- purpose: store a published trigger (standalone or inline), replacing an earlier publication of the same id
insert into automation.triggers (project_id, trigger_id, type, workflow_id, event, ir, origin, active, published_at,
                                 updated_at)
values (:project, :trigger_id, :type, :workflow_id, :event, :ir::jsonb, :origin, true, :now, :now)
on conflict (project_id, trigger_id) do update
    set type = excluded.type, workflow_id = excluded.workflow_id, event = excluded.event, ir = excluded.ir,
        origin = excluded.origin, active = true, updated_at = excluded.updated_at
returning (xmax = 0) as inserted;

-- name: trigger_get
-- purpose: one trigger of a project
select project_id, trigger_id, type, workflow_id, event, ir, origin, active, published_at, updated_at
from automation.triggers where project_id = :project and trigger_id = :trigger_id;

-- name: triggers_list
-- purpose: the triggers of a project, optionally of one type
select project_id, trigger_id, type, workflow_id, event, ir, origin, active, published_at, updated_at
from automation.triggers
where project_id = :project and (:type::text is null or type = :type)
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
where t.project_id = :project and t.event = :type and t.active and t.type = 'event'
order by t.trigger_id;

-- name: webhook_secret_insert
-- purpose: add a secret to a webhook trigger (publish, first use or rotation)
insert into automation.webhook_secrets (secret_id, project_id, trigger_id, secret, created_at, expires_at,
                                        revealed_at)
values (:secret_id, :project, :trigger_id, :secret, :now, null, :revealed_at);

-- name: webhook_secret_count
-- purpose: how many secrets of a webhook trigger are still valid at :now
select count(*) from automation.webhook_secrets
where project_id = :project and trigger_id = :trigger_id and (expires_at is null or expires_at > :now);

-- name: webhook_secret_current
-- purpose: the newest secret of a webhook trigger still valid at :now (the one senders should use)
select secret_id, secret, created_at, expires_at, revealed_at from automation.webhook_secrets
where project_id = :project and trigger_id = :trigger_id and (expires_at is null or expires_at > :now)
order by created_at desc, secret_id desc
limit 1;

-- name: webhook_secret_reveal
-- purpose: mark a secret as shown; returns nothing when it was shown already (secrets are shown once)
update automation.webhook_secrets set revealed_at = :now
where secret_id = :secret_id and revealed_at is null
returning secret;

-- name: webhook_secrets_expire
-- purpose: rotation: every current secret of a trigger stays valid until :until (now + 48 h) and no longer
update automation.webhook_secrets set expires_at = :until
where project_id = :project and trigger_id = :trigger_id and (expires_at is null or expires_at > :until);

-- name: webhook_secrets_list
-- purpose: the secrets of a webhook trigger with their validity, without the secret text
select secret_id, created_at, expires_at, revealed_at from automation.webhook_secrets
where project_id = :project and trigger_id = :trigger_id
order by created_at desc;

-- name: event_key_claim
-- purpose: claim a bus event's idempotency key (recycling one older than the window); returns the event id if claimed
insert into automation.event_keys as k (project_id, key, event_id, created_at)
values (:project, :key, :event_id, :now)
on conflict (project_id, key) do update
    set event_id = excluded.event_id, created_at = excluded.created_at
    where k.created_at <= excluded.created_at - :window::interval
returning event_id;

-- name: event_key_get
-- purpose: the event that holds a bus idempotency key and since when
select event_id, created_at from automation.event_keys where project_id = :project and key = :key;

-- name: event_insert
-- purpose: persist an event envelope (the JSON text byte for byte)
insert into automation.events (event_id, project_id, type, idempotency_key, partition_key, trigger_id, source,
                               occurred_at, received_at, envelope)
values (:event_id, :project, :type, :idempotency_key, :partition_key, :trigger_id, :source, :occurred_at, :now, :envelope);

-- name: event_id_lock
-- purpose: serialise publishers of one client-given event id until commit (transaction advisory lock)
select pg_advisory_xact_lock(hashtextextended('a44.automation.event_id:' || :event_id, 0));

-- name: event_by_id
-- purpose: the event stored under an id in any project (ids are unique across projects), to settle a client-given id
select event_id, project_id, type, idempotency_key, partition_key, occurred_at, received_at, envelope
from automation.events where event_id = :event_id;

-- name: event_get
-- purpose: one event envelope of a project
select event_id, project_id, type, idempotency_key, partition_key, trigger_id, source, occurred_at, received_at,
       envelope
from automation.events where event_id = :event_id and project_id = :project;

-- name: events_list
-- purpose: a project's events newest first, optionally of one type
select event_id, project_id, type, idempotency_key, partition_key, trigger_id, source, occurred_at, received_at
from automation.events
where project_id = :project and (:type::text is null or type = :type)
order by received_at desc, event_id desc
limit :limit offset :offset;

-- name: event_delivery_insert
-- purpose: record what an event became for one subscribed trigger
insert into automation.event_deliveries (event_id, trigger_id, project_id, outcome, run_id, at)
values (:event_id, :trigger_id, :project, :outcome, :run_id, :now)
on conflict (event_id, trigger_id) do nothing;

-- name: event_deliveries_list
-- purpose: what an event became for each subscribed trigger
select trigger_id, outcome, run_id, at from automation.event_deliveries
where event_id = :event_id order by trigger_id;

-- name: webhook_target
-- purpose: what the webhook endpoint caches for a few seconds per trigger: the trigger row (updated_at is its
-- version stamp), every secret still valid at :now with its expiry (the newest first), and the workflow's latest
-- version; `webhook_ingest` re-checks the trigger stamp and the version, so a stale entry never writes
select t.trigger_id, t.workflow_id, t.updated_at,
       coalesce((select array_agg(s.secret order by s.created_at desc, s.secret_id desc)
                 from automation.webhook_secrets s
                 where s.project_id = t.project_id and s.trigger_id = t.trigger_id
                   and (s.expires_at is null or s.expires_at > :now)), '{}') as secrets,
       coalesce((select array_agg(s.expires_at order by s.created_at desc, s.secret_id desc)
                 from automation.webhook_secrets s
                 where s.project_id = t.project_id and s.trigger_id = t.trigger_id
                   and (s.expires_at is null or s.expires_at > :now)), '{}') as secret_expiries,
       v.version, v.ir as workflow_ir
from automation.triggers t
left join lateral (
    select version, ir from automation.workflow_versions w
    where w.project_id = t.project_id and w.workflow_id = t.workflow_id
    order by version desc limit 1
) v on true
where t.project_id = :project and t.trigger_id = :trigger_id and t.type = 'webhook' and t.active;

-- name: webhook_ingest
-- purpose: one accepted webhook in one statement (one round trip; the group committer sends many in one
-- transaction): re-check that the cached trigger (:trigger_id, stamp :trigger_stamp) is still the active webhook trigger of workflow
-- :workflow_id, that the secret :secret that verified the signature is still valid at :now, and that :version is still the latest
-- version (else nothing is written and the caller starts over from a fresh read); then create the run with
-- run_create's own text (fragment run_create_rows: claim the key :key within the window :window, insert the pending run,
-- log run.created), persist the envelope (:event_id, text :envelope) and index it for waiting runs (:corr_hashes, :corr_values) -- all only when the key was claimed. Returns the
-- holder of the key as seen at the statement's start for the deduplicated answer.
with t as (
    select 1 as ok from automation.triggers
    where project_id = :project and trigger_id = :trigger_id and type = 'webhook' and active and workflow_id = :workflow_id
      and updated_at = :trigger_stamp
      and exists (select 1 from automation.webhook_secrets s
                  where s.project_id = :project and s.trigger_id = :trigger_id and s.secret = :secret
                    and (s.expires_at is null or s.expires_at > :now))
), v as (
    select version, (ir ->> 'deadline_ms')::bigint as deadline_ms from automation.workflow_versions
    where project_id = :project and workflow_id = :workflow_id
    order by version desc
    limit 1
), target as (
    select v.version, v.deadline_ms from v, t where v.version = :version
), held as (
    select run_id, created_at from automation.idempotency_keys where project_id = :project and key = :key
),
-- include: run_create_rows
, envelope as (
    insert into automation.events (event_id, project_id, type, idempotency_key, partition_key, trigger_id, source,
                                   occurred_at, received_at, envelope)
    select :event_id, :project, :event_type, :event_key, :partition_key, :trigger_id, 'webhook', :now, :now, :envelope
    from run
), waits as (   -- the event indexed for the runs waiting for it (:corr_hashes / :corr_values, wait_index.py)
    select automation.event_correlate(:project::text, :event_type::text, :event_id::text, :now::timestamptz,
                                      :corr_hashes::text[], :corr_values::text[], :now::timestamptz) as woken
    from run
)
select exists (select 1 from t) as trigger_current, (select version from v) as latest_version,
       (select woken from waits) as woken,
       (select run_id from run) as created_run_id, (select run_id from held) as held_run_id,
       (select created_at from held) as held_at;
