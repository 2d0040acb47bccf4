-- Alerts (§16, docs/alerts.md): rules, samples, the evaluator's lease, alerts with their history, and the
-- enqueue of their notifications (the delivery worker reads automation.notifications).

-- name: alert_rule_upsert
-- purpose: store a rule (replacing its previous definition); returns whether it was created, updated or unchanged
with old as (
    select 1 from automation.alert_rules where project_id = :project and name = :name
), up as (
    insert into automation.alert_rules as r (project_id, name, metric, filter, condition, severity, notify, escalate_to,
                                             suppress_window_s, update_every, origin, created_at, updated_at)
    values (:project, :name, :metric, :filter, :condition, :severity, :notify, :escalate_to, :window_s, :update_every,
            :origin, :now, :now)
    on conflict (project_id, name) do update
        set metric = excluded.metric, filter = excluded.filter, condition = excluded.condition,
            severity = excluded.severity, notify = excluded.notify, escalate_to = excluded.escalate_to,
            suppress_window_s = excluded.suppress_window_s, update_every = excluded.update_every,
            origin = excluded.origin, updated_at = excluded.updated_at
        where (r.metric, r.filter, r.condition, r.severity, r.notify, r.escalate_to, r.suppress_window_s,
               r.update_every, r.origin)
              is distinct from (excluded.metric, excluded.filter, excluded.condition, excluded.severity,
                                excluded.notify, excluded.escalate_to, excluded.suppress_window_s,
                                excluded.update_every, excluded.origin)
    returning name
)
select case when not exists (select 1 from old) then 'created'
            when exists (select 1 from up) then 'updated' else 'unchanged' end;

-- name: alert_rules_list
-- purpose: a project's rules by name (the built-in alerts' routing, metric `builtin`, among them)
select name, metric, filter, condition, severity, notify, escalate_to, suppress_window_s, update_every, origin,
       created_at, updated_at
from automation.alert_rules where project_id = :project order by name;

-- name: alert_rules_all
-- purpose: every project's rules, for the evaluator
select project_id, name, metric, filter, condition, severity, notify, escalate_to, suppress_window_s, update_every
from automation.alert_rules order by project_id, name;

-- name: alert_rule_get
-- purpose: one rule of a project
select name, metric, filter, condition, severity, notify, escalate_to, suppress_window_s, update_every, origin,
       created_at, updated_at
from automation.alert_rules where project_id = :project and name = :name;

-- name: alert_rule_delete
-- purpose: remove a rule; its firing alerts resolve at the next evaluation (no row: no such rule)
delete from automation.alert_rules where project_id = :project and name = :name returning name;

-- name: alert_channel_names
-- purpose: the notification channels a project has (what --notify and --escalate-to may name)
select name from automation.notification_channels where project_id = :project order by name;

-- name: alert_channel_upsert
-- purpose: store a published `kind: channel` (replacing its config); returns whether it was created, updated or unchanged
with old as (
    select 1 from automation.notification_channels where project_id = :project and name = :name
), up as (
    insert into automation.notification_channels as c (project_id, name, kind, config, created_at, updated_at)
    values (:project, :name, :kind, :config::jsonb, :now, :now)
    on conflict (project_id, name) do update
        set kind = excluded.kind, config = excluded.config, updated_at = excluded.updated_at
        where (c.kind, c.config) is distinct from (excluded.kind, excluded.config)
    returning name
)
select case when not exists (select 1 from old) then 'created'
            when exists (select 1 from up) then 'updated' else 'unchanged' end;

-- name: alert_samples_add
-- purpose: record one sample per series (:projects, :metrics, :labels as JSON text, :values) at :at, in one statement
insert into automation.alert_samples (project_id, metric, labels, at, value)
select p, m, l::jsonb, :at, v from unnest(:projects::text[], :metrics::text[], :labels::text[], :values::float8[])
    as t(p, m, l, v);

-- name: alert_samples_prune
-- purpose: drop the samples older than :before (no rule's window reaches them)
delete from automation.alert_samples where at < :before;

-- name: alert_samples_series
-- purpose: the samples of a project's metric since :since, oldest first (every series: the caller filters labels)
select labels, at, value from automation.alert_samples
where project_id = :project and metric = :metric and at >= :since and at <= :now
order by at;

-- name: alert_samples_first
-- purpose: the oldest sample of any metric of a project since :since (the sampler was running then: a counter series younger than a window was born in it)
select min(at) from automation.alert_samples where project_id = :project and at >= :since and at <= :now;

-- name: alert_samples_latest
-- purpose: the latest sample of every series of :metric (the DLQ depth before this sampling, for DLQ growth)
select distinct on (project_id, labels) project_id, labels, value
from automation.alert_samples where metric = :metric and at >= :since
order by project_id, labels, at desc;

-- name: alert_evaluator_claim
-- purpose: take or renew the one evaluator's lease for :holder until :until, unless another holds it unexpired at :now; no row: not ours
insert into automation.alert_evaluator as e (singleton, holder, expires_at) values (true, :holder, :until)
on conflict (singleton) do update set holder = excluded.holder, expires_at = excluded.expires_at
    where e.holder = excluded.holder or e.expires_at < :now
returning event_horizon;

-- name: alert_evaluator_release
-- purpose: give the evaluator's lease up at shutdown (another daemon takes it at its next interval)
update automation.alert_evaluator set expires_at = :now where holder = :holder;

-- name: alert_evaluator_horizon
-- purpose: record that every run outcome up to event id :horizon has been seen, and forget their dedup rows
with e as (
    update automation.alert_evaluator set event_horizon = greatest(event_horizon, :horizon) where holder = :holder
    returning event_horizon
)
delete from automation.alert_seen where event_id <= (select event_horizon from e);

-- name: alert_run_outcomes
-- purpose: run state changes after :after (the built-in alerts' input) not yet seen: failed, partial, compensation_failed, awaiting_confirmation, blocked_version, succeeded, with the run's context, the failed step's attempts, its failed partitions (the first 10 and how many), its waiting dead letter, the interpreter's alert data and, for a child workflow's run, its parent and root (§21)
select e.id, e.at, e.project_id, e.run_id, e.state, coalesce(e.error_code, r.error_code) as error_code,
       (select c.root_run_id from automation.run_children c where c.child_run_id = e.run_id) as root_run_id,
       (select c.parent_run_id from automation.run_children c where c.child_run_id = e.run_id) as parent_run_id,
       coalesce(e.message, r.error_message) as error_message, r.workflow_id, r.version, r.partition_key,
       coalesce(e.step_id, r.failed_step, r.current_step) as step_id, r.queue,
       (select count(*) from automation.step_attempts a
        where a.run_id = e.run_id and a.step_id = coalesce(e.step_id, r.failed_step, r.current_step)
          and a.kind = 'action')::int as attempts,
       (select a.data from automation.run_events a
        where a.run_id = e.run_id and a.kind = 'alert' and e.state <> 'succeeded'
        order by a.id desc limit 1) as alert_data,
       case when e.state in ('failed', 'partial') then
           (select coalesce(jsonb_agg(jsonb_build_object('step', f.step_id, 'partition', f.partition, 'state', f.state,
                                                         'error_code', f.error_code, 'error_message', f.error_message,
                                                         'attempts', f.attempts) order by f.step_id, f.ordinal),
                            '[]'::jsonb)
            from (select p.step_id, p.partition, p.ordinal, p.state, p.error_code, p.error_message, p.attempts
                  from automation.run_partitions p
                  where p.run_id = e.run_id and p.state in ('failed', 'timeout')
                  order by p.step_id, p.ordinal limit 10) f)
       end as failed_partitions,
       case when e.state in ('failed', 'partial') then
           (select count(*) from automation.run_partitions p
            where p.run_id = e.run_id and p.state in ('failed', 'timeout'))::int
       end as failed_partition_count,
       case when e.state = 'failed' then
           (select jsonb_build_object('dead_letter_id', d.dead_letter_id, 'queue', coalesce(d.queue, 'q_default'))
            from automation.dead_letters d where d.run_id = e.run_id and d.redriven_at is null
            order by d.created_at desc limit 1)
       end as dead_letter
from automation.run_events e
join automation.runs r on r.run_id = e.run_id
where e.id > :after and e.kind = 'run.state'
  and e.state in ('failed', 'partial', 'compensation_failed', 'awaiting_confirmation', 'blocked_version', 'succeeded')
  and not exists (select 1 from automation.alert_seen s where s.event_id = e.id)
order by e.id
limit :limit;

-- name: alert_outcome_horizon
-- purpose: the newest run outcome id after :after recorded before :before (older outcomes have all committed by now), null: none
select max(id) from automation.run_events
where id > :after and kind = 'run.state'
  and state in ('failed', 'partial', 'compensation_failed', 'awaiting_confirmation', 'blocked_version', 'succeeded') and at < :before;

-- name: alert_seen_add
-- purpose: remember the run outcomes :ids as turned into alerts (a late commit with a lower id is not seen twice); returns those not seen before
insert into automation.alert_seen (event_id) select unnest(:ids::bigint[]) on conflict do nothing
returning event_id;

-- name: alert_runs_waiting
-- purpose: how many runs of a workflow still wait in :state (a built-in alert on a parked run clears at 0)
select count(*)::int from automation.runs
where project_id = :project and workflow_id = :workflow and state = :state;

-- name: alert_dead_letters_recent
-- purpose: the newest :limit dead letters of a queue waiting (not redriven): the causes a DLQ alert names
select dead_letter_id, workflow_id, run_id, step_id, partition_key, error_code, error_message, attempts, created_at
from automation.dead_letters
where project_id = :project and coalesce(queue, 'q_default') = :queue and redriven_at is null
order by created_at desc, dead_letter_id desc limit :limit;

-- name: alert_firing_get
-- purpose: the firing alert of a rule and group, locked for this transaction's state change
select alert_id, rule, group_key, severity, machine, context, opened_at from automation.alerts
where project_id = :project and rule = :rule and group_key = :group_key and state = 'firing'
for update;

-- name: alerts_firing_all
-- purpose: every firing alert (the evaluator's ticks: escalation when a window ends, clearing)
select alert_id, project_id, rule, group_key, severity, machine, context, opened_at from automation.alerts
where state = 'firing' order by opened_at;

-- name: alert_insert
-- purpose: open an alert (firing); no row: one is already firing for this rule and group (a racing evaluator)
insert into automation.alerts (alert_id, project_id, rule, group_key, state, severity, machine, context, opened_at,
                               updated_at)
values (:alert_id, :project, :rule, :group_key, 'firing', :severity, :machine::jsonb, :context::jsonb, :now, :now)
on conflict do nothing
returning alert_id;

-- name: alert_update
-- purpose: store an alert's new suppression state and context; resolved when :resolved
update automation.alerts
set machine = :machine::jsonb, context = :context::jsonb, updated_at = :now,
    state = case when :resolved then 'resolved' else state end,
    resolved_at = case when :resolved then :now else resolved_at end
where alert_id = :alert_id;

-- name: alert_history_add
-- purpose: record a transition of an alert and where its message was enqueued
insert into automation.alert_history (alert_id, at, kind, count, channels)
values (:alert_id, :now, :kind, :count, :channels::text[]);

-- name: notification_enqueue
-- purpose: enqueue one message for the delivery worker; a second enqueue of the same idempotency key is a no-op (returns no row)
insert into automation.notifications (project_id, channel, idempotency_key, alert_id, kind, severity, payload,
                                      next_attempt_at, created_at)
values (:project, :channel, :key, :alert_id, :kind, :severity, :payload::jsonb, :now, :now)
on conflict (project_id, idempotency_key) do nothing
returning id;

-- name: alerts_list
-- purpose: a project's alerts, firing first then newest, optionally of one :state
select alert_id, rule, group_key, state, severity, machine, context, opened_at, updated_at, resolved_at
from automation.alerts
where project_id = :project and (:state::text is null or state = :state)
order by state = 'firing' desc, opened_at desc
limit :limit;

-- name: alert_history_of
-- purpose: the history of alerts :alert_ids, in order
select alert_id, at, kind, count, channels from automation.alert_history
where alert_id = any(:alert_ids::text[]) order by alert_id, id;

-- name: alerts_firing_counts
-- purpose: firing alerts per project, rule and severity (/metrics automation_alerts_firing)
select project_id, rule, severity, count(*)::bigint as n from automation.alerts
where state = 'firing' group by 1, 2, 3 order by 1, 2, 3;

-- name: alert_incident_open
-- purpose: the open incident of a cause on a channel (one of its alerts still fires), locked for this transaction
select i.cause, i.notification_id, i.alert_ids, i.rules from automation.alert_incidents i
where i.project_id = :project and i.channel = :channel and i.cause = :cause
  and exists (select 1 from automation.alerts a where a.alert_id = any(i.alert_ids) and a.state = 'firing')
for update;

-- name: alert_incident_open_new
-- purpose: open (or reopen, replacing a closed one) the incident of a cause on a channel with the message it sent
insert into automation.alert_incidents (project_id, channel, cause, notification_id, alert_ids, rules, opened_at,
                                        updated_at)
values (:project, :channel, :cause, :notification_id, array[:alert_id::text], array[:rule::text], :now, :now)
on conflict (project_id, channel, cause) do update
    set notification_id = excluded.notification_id, alert_ids = excluded.alert_ids, rules = excluded.rules,
        opened_at = excluded.opened_at, updated_at = excluded.updated_at;

-- name: alert_incident_join
-- purpose: add an alert and its rule to an open incident
update automation.alert_incidents
set alert_ids = array_append(alert_ids, :alert_id::text),
    rules = case when :rule::text = any(rules) then rules else array_append(rules, :rule::text) end,
    updated_at = :now
where project_id = :project and channel = :channel and cause = :cause and not (:alert_id::text = any(alert_ids));

-- name: alert_incident_message_add
-- purpose: name one more matched rule in an incident's message while it waits unsent (no row: it has left)
update automation.notifications
set payload = jsonb_set(jsonb_set(payload, '{rules}', coalesce(payload->'rules', '[]'::jsonb) || to_jsonb(:rule::text)),
                        '{matched}', coalesce(payload->'matched', '[]'::jsonb) || :matched::jsonb)
where id = :id and state = 'pending' and attempts = 0 and not (coalesce(payload->'rules', '[]'::jsonb) ? :rule::text)
returning id;

-- name: alert_incidents_prune
-- purpose: forget incidents none of whose alerts fires any more and that opened before :before
delete from automation.alert_incidents i
where i.opened_at < :before
  and not exists (select 1 from automation.alerts a where a.alert_id = any(i.alert_ids) and a.state = 'firing');

-- name: alert_runs_recent
-- purpose: the newest :limit runs of workflow :workflow in state :state (the causes a rule on automation.runs names), with the failed step's attempts
select r.run_id, r.workflow_id, r.state, r.failed_step, r.current_step, r.partition_key, r.error_code, r.error_message,
       (select count(*) from automation.step_attempts a
        where a.run_id = r.run_id and a.step_id = r.failed_step and a.kind = 'action')::int as attempts
from automation.runs r
where r.project_id = :project and r.state = :state and r.workflow_id = :workflow
order by r.created_at desc, r.run_id desc
limit :limit;
