-- 0029_alert_incidents: alerts grouped into one incident per cause (docs/alerts.md "Incidents"). A cause is what
-- an alert is about: a run (`run:RUN`) for a run outcome, a dead-lettered run (or the dead letter itself) for a
-- DLQ alert or a rule on automation.dlq_depth. The first firing message about a cause on a channel opens the
-- incident; a later alert whose every cause has an open incident on that channel sends no message of its own: its
-- rule is added to the incident's message while that message waits, else only recorded on the incident. An
-- incident is open while one of its alerts fires. `partial` runs raise alerts too: the outcomes' index covers them,
-- and a failed run's dead letter is found by run.
create table automation.alert_incidents (
    project_id      text        not null,
    channel         text        not null,
    cause           text        not null,          -- run:RUN | dead_letter:ID
    notification_id bigint      not null,          -- the one message the incident sent
    alert_ids       text[]      not null,          -- the alerts it groups, in the order they matched
    rules           text[]      not null,
    opened_at       timestamptz not null,
    updated_at      timestamptz not null,
    constraint alert_incidents_pkey primary key (project_id, channel, cause)
);
create index alert_incidents_opened_idx on automation.alert_incidents (opened_at);

drop index automation.run_events_outcome_idx;
create index run_events_outcome_idx on automation.run_events (id)
    where kind = 'run.state'
      and state in ('failed', 'partial', 'compensation_failed', 'awaiting_confirmation', 'succeeded');

create index dead_letters_run_idx on automation.dead_letters (run_id) where run_id is not null;
