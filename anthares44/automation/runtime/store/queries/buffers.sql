-- Debounce and batch buffers (§22, docs/flow.md "Debounce and batch"; migration 0040_debounce_batch). Every instant
-- comes from the caller's clock (:now), never from now().

-- name: flow_buffer_open
-- purpose: the open buffer of (workflow, kind, key), opened at :now when none is; the upsert takes the buffer's row lock until the transaction ends (a flush of it waits for this transaction; this one, behind a flush, then opens a new buffer); the buffer's row
insert into automation.flow_buffers as b
    (buffer_id, project_id, workflow_id, kind, buffer_key, deliver, queue, partition_key, first_at, last_at, due_at,
     max_due_at)
values (:buffer_id, :project, :workflow_id, :kind, :key, :deliver, :queue, :partition_key, :now, :now, :due_at,
        :max_due_at)
on conflict (project_id, workflow_id, kind, buffer_key) where state = 'open' do update set last_at = b.last_at
returning buffer_id, kind, buffer_key, deliver, queue, first_at, due_at, max_due_at, events, bytes;

-- name: flow_buffer_event_held
-- purpose: the buffer that already holds event :event_id for workflow :workflow_id (an event is in one buffer of a workflow), with the run it started when flushed
select e.buffer_id, b.run_id
from automation.flow_buffer_events e
join automation.flow_buffers b on b.buffer_id = e.buffer_id
where e.project_id = :project and e.workflow_id = :workflow_id and e.event_id = :event_id;

-- name: flow_buffer_add
-- purpose: put one envelope in buffer :buffer_id (held locked by flow_buffer_open) and move its due instant (debounce: quiet after this event, never past first + maxWait); its event count and bytes after, no row when the event was already held
with ev as (
    insert into automation.flow_buffer_events (buffer_id, project_id, workflow_id, event_id, trigger_id, occurred_at,
                                               received_at, bytes, envelope)
    values (:buffer_id, :project, :workflow_id, :event_id, :trigger_id, :occurred_at, :now, :bytes, :envelope::jsonb)
    on conflict do nothing
    returning bytes
)
update automation.flow_buffers b
set events = b.events + 1, bytes = b.bytes + ev.bytes, last_at = :now,
    due_at = case when b.kind = 'debounce'
                  then least(:now::timestamptz + :quiet_ms * interval '1 millisecond', b.max_due_at)
                  else b.due_at end
from ev
where b.buffer_id = :buffer_id
returning b.events, b.bytes, b.due_at;

-- name: flow_buffer_close
-- purpose: the one conditional transition of a flush: buffer :buffer_id from open to flushed at :now for :reason, naming the run :run_id it starts (in the same transaction); no row when it was flushed already
update automation.flow_buffers
set state = 'flushed', flushed_at = :now, flush_reason = :reason, run_id = :run_id
where buffer_id = :buffer_id and state = 'open'
returning buffer_id, project_id, workflow_id, kind, buffer_key, deliver, queue, partition_key, first_at, events, bytes;

-- name: flow_buffer_envelopes
-- purpose: the envelopes buffer :buffer_id holds, in occurred_at order (arrival breaks ties)
select event_id, trigger_id, occurred_at, envelope
from automation.flow_buffer_events
where buffer_id = :buffer_id
order by occurred_at, seq;

-- name: flow_buffer_link_deliveries
-- purpose: the deliveries that joined buffer :buffer_id now name the run :run_id its flush started
update automation.event_deliveries d
set run_id = :run_id
from automation.flow_buffer_events e
where e.buffer_id = :buffer_id and d.event_id = e.event_id and d.trigger_id = e.trigger_id and d.outcome = 'buffered';

-- name: flow_buffer_take_due
-- purpose: one open buffer due at :now, locked (SKIP LOCKED: a buffer another daemon is flushing, or an ingestion is adding to, is left to them); its row
select buffer_id, due_at, max_due_at
from automation.flow_buffers
where state = 'open' and due_at <= :now
order by due_at
limit 1
for update skip locked;

-- name: flow_buffer_next_due
-- purpose: the earliest instant an open buffer is due (null: no buffer is open)
select min(due_at) from automation.flow_buffers where state = 'open';

-- name: flow_buffers_open
-- purpose: the open buffers of a project (of one workflow when :workflow_id is given), the oldest first
select buffer_id, workflow_id, kind, buffer_key, deliver, events, bytes, first_at, last_at, due_at, max_due_at
from automation.flow_buffers
where project_id = :project and state = 'open' and (:workflow_id::text is null or workflow_id = :workflow_id)
order by first_at, buffer_id
limit :limit;

-- name: flow_buffer_of_run
-- purpose: the buffer whose flush started run :run_id (no row: the run carries no buffered events)
select buffer_id, kind, buffer_key, deliver, events, bytes, first_at, flushed_at, flush_reason
from automation.flow_buffers
where run_id = :run_id;

-- name: flow_buffer_carried
-- purpose: the events a flushed buffer carried, in occurred_at order (at most :limit)
select event_id, trigger_id, occurred_at, received_at, envelope ->> 'type' as type,
       envelope ->> 'idempotency_key' as idempotency_key
from automation.flow_buffer_events
where buffer_id = :buffer_id
order by occurred_at, seq
limit :limit;

-- name: flow_buffer_key_claim
-- purpose: claim the idempotency key :key of a buffered webhook request for buffer :buffer_id (recycling one older than :window); the buffer id when claimed, no row when the key is held
insert into automation.flow_buffer_keys as k (project_id, key, buffer_id, event_id, created_at)
values (:project, :key, :buffer_id, :event_id, :now)
on conflict (project_id, key) do update
    set buffer_id = excluded.buffer_id, event_id = excluded.event_id, created_at = excluded.created_at
    where k.created_at <= excluded.created_at - :window::interval
returning buffer_id;

-- name: flow_buffer_key_get
-- purpose: the buffer that holds a buffered webhook request's idempotency key, since when, and the run its flush started
select k.buffer_id, k.created_at, b.run_id
from automation.flow_buffer_keys k
join automation.flow_buffers b on b.buffer_id = k.buffer_id
where k.project_id = :project and k.key = :key;

-- name: flow_buffer_metrics
-- purpose: per project and workflow: open buffers, events they hold, events ever buffered, flushes by reason (read at scrape time: no counter to drift)
select project_id, workflow_id,
       count(*) filter (where state = 'open') as open_buffers,
       coalesce(sum(events) filter (where state = 'open'), 0)::bigint as open_events,
       coalesce(sum(events), 0)::bigint as events_buffered,
       count(*) filter (where flush_reason = 'quiet') as quiet,
       count(*) filter (where flush_reason = 'maxWait') as "maxWait",
       count(*) filter (where flush_reason = 'maxSize') as "maxSize",
       count(*) filter (where flush_reason = 'maxBytes') as "maxBytes"
from automation.flow_buffers
group by project_id, workflow_id
order by project_id, workflow_id;

-- name: flow_webhook_current
-- purpose: is the cached webhook trigger :trigger_id (stamp :trigger_stamp, workflow :workflow_id) still active with secret :secret valid at :now, and :version the workflow's latest version (the checks webhook_ingest makes, for a request that joins a buffer)
select exists (
    select 1 from automation.triggers t
    where t.project_id = :project and t.trigger_id = :trigger_id and t.type = 'webhook' and t.active
      and t.workflow_id = :workflow_id and t.updated_at = :trigger_stamp
      and exists (select 1 from automation.webhook_secrets s
                  where s.project_id = :project and s.trigger_id = :trigger_id and s.secret = :secret
                    and (s.expires_at is null or s.expires_at > :now))
) and :version::integer = (select max(version) from automation.workflow_versions
                           where project_id = :project and workflow_id = :workflow_id);
