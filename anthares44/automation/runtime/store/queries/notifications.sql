-- Notification channels and the outbox of notifications to them (migration 0011, docs/notifications.md).

-- name: notify_channel_insert
-- purpose: declare channel :name of kind :kind with config :config; no row back when the name is taken
insert into automation.notification_channels (project_id, name, kind, config, created_at, updated_at)
values (:project, :name, :kind, :config, :now, :now)
on conflict (project_id, name) do nothing
returning name;

-- name: notify_channel_list
-- purpose: a project's channels by name
select name, kind, config, created_at, updated_at
from automation.notification_channels where project_id = :project order by name;

-- name: notify_channel_get
-- purpose: one channel of the project
select name, kind, config, created_at, updated_at
from automation.notification_channels where project_id = :project and name = :name;

-- name: notify_channel_delete
-- purpose: remove channel :name; its name back when it existed
delete from automation.notification_channels where project_id = :project and name = :name returning name;

-- name: notify_enqueue
-- purpose: queue a notification to channel :channel, due at :now; a second enqueue of the same :idempotency_key is a no-op (no row back)
insert into automation.notifications (project_id, channel, idempotency_key, alert_id, kind, severity, payload,
                                      next_attempt_at, created_at)
values (:project, :channel, :idempotency_key, :alert_id, :kind, :severity, :payload, :now, :now)
on conflict (project_id, idempotency_key) do nothing
returning id;

-- name: notify_claim
-- purpose: lease up to :limit due pending notifications (only :id when given) until :lease_until, counting the attempt; rows another daemon holds are skipped, and so is a message of an alert whose earlier message to the same channel is still pending (an alert's messages arrive in order); with their channel's kind and config (null: the channel is gone)
with due as (
    select id from automation.notifications n
    where state = 'pending' and next_attempt_at <= :now and (:id::bigint is null or id = :id)
      and (n.alert_id is null
           or not exists (select 1 from automation.notifications e
                          where e.alert_id = n.alert_id and e.channel = n.channel and e.state = 'pending'
                            and e.id < n.id))
    order by next_attempt_at, id
    for update skip locked
    limit :limit
)
update automation.notifications n
set attempts = n.attempts + 1, next_attempt_at = :lease_until
from due
where n.id = due.id
returning n.id, n.project_id, n.channel, n.idempotency_key, n.alert_id, n.kind, n.severity, n.payload, n.attempts,
          n.created_at,
          (select c.kind from automation.notification_channels c
           where c.project_id = n.project_id and c.name = n.channel) as channel_kind,
          (select c.config from automation.notification_channels c
           where c.project_id = n.project_id and c.name = n.channel) as channel_config;

-- name: notify_delivered
-- purpose: record the delivery of attempt :attempt (a lease taken over since by another daemon's attempt changes nothing)
update automation.notifications set state = 'delivered', delivered_at = :now, last_error = null
where id = :id and attempts = :attempt and state = 'pending'
returning id;

-- name: notify_retry_later
-- purpose: after failed attempt :attempt, due again at :next with its error (nothing when the lease was taken over)
update automation.notifications set next_attempt_at = :next, last_error = :error
where id = :id and attempts = :attempt and state = 'pending'
returning id;

-- name: notify_failed
-- purpose: after attempt :attempt, give up: state failed with its error (nothing when the lease was taken over)
update automation.notifications set state = 'failed', last_error = :error, next_attempt_at = :now
where id = :id and attempts = :attempt and state = 'pending'
returning id;

-- name: notify_get
-- purpose: one notification of the project
select id, channel, idempotency_key, alert_id, kind, severity, payload, state, attempts, next_attempt_at,
       last_error, created_at, delivered_at
from automation.notifications where project_id = :project and id = :id;

-- name: notify_list
-- purpose: a project's notifications newest first, only those in :state when given
select id, channel, idempotency_key, alert_id, kind, severity, state, attempts, next_attempt_at, last_error,
       created_at, delivered_at
from automation.notifications
where project_id = :project and (:state::text is null or state = :state)
order by id desc
limit :limit;

-- name: notify_requeue
-- purpose: send a failed notification again from a fresh attempt budget, due at :now; its state back (none: no such notification)
with target as (
    select id, state from automation.notifications where project_id = :project and id = :id for update
), requeued as (
    update automation.notifications n set state = 'pending', attempts = 0, next_attempt_at = :now
    from target where n.id = target.id and target.state = 'failed'
    returning n.id
)
select target.state as previous, (select count(*) from requeued) = 1 as requeued from target;

-- name: notify_next_due
-- purpose: when the earliest pending notification that may be sent is due (null: none is pending); one waiting behind an earlier message of its alert is due when that one is
select min(n.next_attempt_at) from automation.notifications n
where n.state = 'pending'
  and (n.alert_id is null
       or not exists (select 1 from automation.notifications e
                      where e.alert_id = n.alert_id and e.channel = n.channel and e.state = 'pending'
                        and e.id < n.id));

-- name: metrics_notifications
-- purpose: notifications waiting or given up, per project, channel and state (the /metrics families of docs/notifications.md)
select project_id, channel, state, count(*)::bigint as n
from automation.notifications where state in ('pending', 'failed')
group by project_id, channel, state
order by project_id, channel, state;
