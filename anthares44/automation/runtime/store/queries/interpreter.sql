-- The interpreter's writes and reads (engine/). A step transition is one `engine_commit` statement (migration
-- 0018): the lease fence, then the batch's operations, so a worker whose lease was re-granted writes nothing and a
-- transition the state machine (engine/states.py, docs/states.md) does not allow writes nothing either.

-- name: engine_commit
-- purpose: one step transition in one statement: if (:owner, grant :grant) still holds run :run_id's lease, note :current_step, then apply the JSON array :ops of {"op": kind, ...} in order (0018, 0045; SQLSTATE A44LL lease lost, A44NR attempt not running, A44IT illegal transition, A44CQ a cancel request forbids ending succeeded/partial)
select automation.engine_commit_v2(:run_id::text, :owner::text, :grant::integer, :current_step::text,
                                   :now::timestamptz, :ops::jsonb);

-- name: engine_commit_many
-- purpose: group commit: the transitions of several runs in one transaction, each all or nothing (0020, 0045); :batches is a JSON array of {run_id, owner, grant, current_step, now, ops}, :synchronous_commit this transaction's setting (null: the server's); returns per batch null (applied) or its {sqlstate, message, detail, hint}
select automation.engine_commit_many_v2(:batches::jsonb, :synchronous_commit::text);

-- name: engine_notify
-- purpose: after commit, wake `logs --follow` / `run --wait` of runs :run_ids (a44_run_events) and daemons for the earliest due time :due_ms in epoch ms (a44_runs_due), in one statement
select count(*) from (
    select pg_notify('a44_run_events', r) from unnest(:run_ids::text[]) as r
    union all
    select pg_notify('a44_runs_due', :due_ms::text) where :due_ms::text is not null
) n;

-- name: engine_attempt_record
-- purpose: insert an attempt already finished outside a step transition (a person's confirmation) and log it: the engine_op_attempt_record operation of 0013
select automation.engine_op_attempt_record(jsonb_build_object(
    'run_id', :run_id::text, 'step_id', :step_id::text, 'attempt', :attempt::integer, 'key', :key::text,
    'started_at', :started_at::timestamptz, 'epoch', :epoch::integer, 'kind', :kind::text, 'project', :project::text,
    'worker_id', :worker_id::text, 'lease_grant', :lease_grant::integer, 'status', :status::text,
    'error_code', :error_code::text, 'error_message', :error_message::text, 'result', :result::text,
    'result_bytes', :result_bytes::integer, 'retry_at', :retry_at::timestamptz, 'result_ref', :result_ref::text,
    'finished_at', :finished_at::timestamptz));

-- name: engine_attempts_of_run
-- purpose: every attempt of a run's epoch, in start order, to rebuild where the run stands
select step_id, kind, attempt, status, error_code, error_message, result, result_ref, started_at, finished_at,
       retry_at, due_at
from automation.step_attempts
where run_id = :run_id and epoch = :epoch
order by started_at, kind, attempt;

-- name: engine_completion_order
-- purpose: the steps of a run's epoch in the order their action succeeded (log order), for reverse-order compensation
select step_id
from automation.run_events
where run_id = :run_id and kind = 'attempt.finished' and status = 'succeeded'
  and data ->> 'kind' = 'action' and (data ->> 'epoch')::integer = :epoch
order by id;

-- name: confirmation_resolve
-- purpose: a person resolved the exclusive step :step_id of a run parked in awaiting_confirmation: due again now (:now); no row = not parked on that step
with prev as (
    select run_id, state from automation.runs
    where run_id = :run_id and state = 'awaiting_confirmation' and current_step = :step_id
    for update
), r as (
    update automation.runs r
    set state = 'pending', next_wake_at = :now, updated_at = :now,
        error_code = null, error_message = null
    from prev
    where r.run_id = prev.run_id
    returning r.run_id, r.project_id, r.epoch, r.state, prev.state as prev_state
), ev as (
    insert into automation.run_events (run_id, project_id, at, kind, state, step_id, data)
    select run_id, project_id, :now, 'run.state', state, :step_id,
           jsonb_build_object('from', prev_state, 'outcome', :outcome::text, 'by', :who::text)
    from r
)
select run_id, project_id, epoch from r;

-- name: confirmation_last_attempt
-- purpose: the highest action attempt number of a step in the run's epoch (the resolved attempt follows it)
select coalesce(max(attempt), 0)
from automation.step_attempts
where run_id = :run_id and step_id = :step_id and epoch = :epoch and kind = 'action';

-- name: queue_expire_waiting
-- purpose: §10.3 maxAge: runs still waiting in a queue (never started) longer than its deadLetter.maxAge at :now are cancelled with E_EVENT_TOO_OLD and sent to the DLQ, at most :limit per call
with x as (
    select r.run_id
    from automation.queues q
    join automation.runs r on r.project_id = q.project_id and r.queue = q.queue_id
    where q.max_age_ms is not null and q.dead_letter_enabled and r.state = 'pending' and r.started_at is null
      and r.lease_owner is null and r.created_at < :now::timestamptz - make_interval(secs => q.max_age_ms / 1000.0)
    limit :limit
    for update of r skip locked
), c as (
    update automation.runs r
    set state = 'cancelled', next_wake_at = null, error_code = 'E_EVENT_TOO_OLD',
        error_message = 'waited in queue ' || r.queue || ' longer than its deadLetter.maxAge', finished_at = :now,
        updated_at = :now
    from x
    where r.run_id = x.run_id
    returning r.*
), ev as (
    insert into automation.run_events (run_id, project_id, at, kind, state, error_code, message, data)
    select run_id, project_id, :now, 'run.state', 'cancelled', error_code, error_message,
           jsonb_build_object('from', 'pending', 'reason', 'max_age')
    from c
), dead as (
    insert into automation.dead_letters (dead_letter_id, project_id, queue, trigger_id, workflow_id, event_id,
                                         envelope, envelope_bytes, error_code, error_message, attempts, created_at,
                                         run_id, version, partition_key, input, history, redrive_of)
    select 'dlq_' || replace(gen_random_uuid()::text, '-', ''), c.project_id, c.queue, c.trigger_id, c.workflow_id,
           c.event_id,
           coalesce((select d.envelope from automation.dead_letters d where d.dead_letter_id = c.dead_letter_id),
                    (select e.envelope from automation.events e where e.event_id = c.event_id),
                    jsonb_build_object('id', coalesce(c.origin_run_id, c.run_id), 'type', 'run',
                                       'idempotency_key', c.idempotency_key, 'partition_key', c.partition_key,
                                       'occurred_at', c.created_at, 'attempt', 1, 'data', c.input,
                                       'trigger_id', c.trigger_id, 'workflow_id', c.workflow_id)::text),
           (select d.envelope_bytes from automation.dead_letters d where d.dead_letter_id = c.dead_letter_id),
           'E_EVENT_TOO_OLD', c.error_message, c.delivery - 1, :now, c.run_id, c.version, c.partition_key,
           c.input,
           coalesce((select d.history from automation.dead_letters d where d.dead_letter_id = c.dead_letter_id),
                    '[]'::jsonb),
           c.dead_letter_id
    from c
    returning dead_letter_id
)
select count(*) from dead;
