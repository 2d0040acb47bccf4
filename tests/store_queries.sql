-- Named queries only the tests run (tests/store_queries.py runs them on a Store's pool): what a test reads back to
-- check the store, which the package itself never asks. Format: anthares44/automation/named_sql.py.

-- name: ingestion_row_counts
-- purpose: rows in the tables a webhook or API request may write (a rejected request writes nothing)
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

-- name: logs_archive_days
-- purpose: the days the archive holds, oldest first
select day, rows, path, archived_at from automation.log_archive_days order by day;

-- name: run_signals_of_run
-- purpose: the signals sent to run :run_id in the order received, with the wait that consumed each
select seq, name, data, idempotency_key, sent_by, received_at, consumed_epoch, consumed_step, consumed_at
from automation.run_signals
where run_id = :run_id
order by seq;

-- name: children_count_of_parents
-- purpose: how many child runs the runs :run_ids started for their steps (compensations left out)
select count(*)::bigint from automation.run_children where parent_run_id = any(:run_ids::text[]) and kind = 'action';

-- name: flow_holders
-- purpose: live holders per flow key, counted from the runs (a slot is a run's lease, or its start for a holdWhileWaiting key): what the claim counts
select k as key, count(*)::int as n
from automation.runs r cross join lateral unnest(r.flow_keys, r.flow_hold) u(k, hold)
where r.lease_owner is not null
   or (u.hold and r.state in ('running', 'waiting', 'sleeping', 'awaiting_confirmation', 'compensating'))
group by k;

-- name: flow_run_outcome
-- purpose: a run's state, error and flow columns, and the dead letter made of it if any
select r.state, r.error_code, r.error_message, r.flow_keyed, r.flow_keys, r.next_wake_at, r.flow_parked_at,
       (select d.error_code from automation.dead_letters d where d.run_id = r.run_id) as dlq_code
from automation.runs r where r.run_id = :run_id;
