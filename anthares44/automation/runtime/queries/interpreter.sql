-- The interpreter's writes and reads (engine/). Every write of a lease holder first passes run_fence in the
-- same transaction, so a worker whose lease was re-granted writes nothing; run state changes go through
-- run_transition, which refuses a transition the state machine (engine/states.py, docs/states.md) does not allow.

-- name: run_fence
-- purpose: lock the run for this transaction if (:owner, grant :grant) still holds its lease, noting the current step, and defer this transaction's NOTIFYs to the engine (0006); no row = lease lost
update automation.runs
set current_step = coalesce(:current_step, current_step), updated_at = :now
where run_id = :run_id and lease_owner = :owner and lease_grants = :grant
returning state, set_config('a44.notify', 'deferred', true);

-- name: engine_notify
-- purpose: after commit, wake `logs --follow` / `run --wait` of runs :run_ids (a44_run_events) and daemons for the earliest due time :due_ms in epoch ms (a44_runs_due), in one statement
select count(*) from (
    select pg_notify('a44_run_events', r) from unnest(:run_ids::text[]) as r
    union all
    select pg_notify('a44_runs_due', :due_ms::text) where :due_ms::text is not null
) n;

-- name: run_transition
-- purpose: move a leased run to state :to only from one of :allowed_from (else no row), optionally releasing the lease, and log run.state
with prev as (
    select run_id, state from automation.runs
    where run_id = :run_id and lease_owner = :owner and lease_grants = :grant
    for update
), r as (
    update automation.runs r
    set state = :to, next_wake_at = :next_wake_at,
        lease_owner = case when :release then null else r.lease_owner end,
        lease_deadline = case when :release then null else r.lease_deadline end,
        failed_step = coalesce(:failed_step, r.failed_step), error_code = coalesce(:error_code, r.error_code),
        error_message = coalesce(:message, r.error_message), result = coalesce(:result::jsonb, r.result),
        summary = coalesce(:summary::jsonb, r.summary),
        finished_at = case when :finished then :now else r.finished_at end, updated_at = :now
    from prev
    where r.run_id = prev.run_id and prev.state = any(:allowed_from::text[])
    returning r.run_id, r.project_id, r.state, r.next_wake_at, prev.state as prev_state
), ev as (
    insert into automation.run_events (run_id, project_id, at, kind, state, step_id, error_code, message, data)
    select run_id, project_id, :now, 'run.state', state, :failed_step, :error_code, :message,
           jsonb_build_object('from', prev_state, 'next_wake_at', next_wake_at)
    from r
    where prev_state <> state
)
select (select state from prev) as prev_state, (select state from r) as new_state;

-- name: engine_attempt_finish
-- purpose: finish a running attempt (status, error, result or reference, retry due time) and log attempt.finished; no row = not running
with a as (
    update automation.step_attempts
    set status = :status, error_code = :error_code, error_message = :error_message, result = :result::jsonb, result_ref = :result_ref,
        result_bytes = :result_bytes, finished_at = :finished_at, retry_at = :retry_at
    where run_id = :run_id and step_id = :step_id and epoch = :epoch and kind = :kind and attempt = :attempt and started_at = :started_at
      and status = 'running'
    returning run_id, project_id, step_id, attempt, epoch, kind, status, error_code, error_message,
              started_at, finished_at, retry_at
)
insert into automation.run_events (run_id, project_id, at, kind, step_id, attempt, status, error_code, message, data)
select run_id, project_id, finished_at, 'attempt.finished', step_id, attempt, status, error_code, error_message,
       jsonb_build_object('epoch', epoch, 'kind', kind, 'retry_at', retry_at,
                          'duration_ms', round(extract(epoch from finished_at - started_at) * 1000))
from a
returning id;

-- name: engine_attempt_record
-- purpose: insert an attempt already finished: started at :started_at, finished at :finished_at (skipped by `if`, failed by deadline or expression, confirmed by a person, or a `pass` step run on the spot) and log it
with a as (
    insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, error_code,
                                          error_message, result, started_at, finished_at, epoch, kind,
                                          project_id, worker_id, lease_grant, result_bytes, retry_at, result_ref)
    values (:run_id, :step_id, :attempt, :key, :status, :error_code, :error_message, :result::jsonb, :started_at, :finished_at, :epoch, :kind, :project, :worker_id, :lease_grant, :result_bytes, :retry_at, :result_ref)
    returning run_id, step_id, attempt, epoch, kind, project_id, started_at, finished_at, status, error_code,
              error_message, retry_at
)
insert into automation.run_events (run_id, project_id, at, kind, step_id, attempt, status, error_code, message, data)
select run_id, project_id, finished_at, 'attempt.finished', step_id, attempt, status, error_code, error_message,
       jsonb_build_object('epoch', epoch, 'kind', kind, 'retry_at', retry_at,
                          'duration_ms', round(extract(epoch from finished_at - started_at) * 1000))
from a
returning id;

-- name: engine_attempts_of_run
-- purpose: every attempt of a run's epoch, in start order, to rebuild where the run stands
select step_id, kind, attempt, status, error_code, error_message, result, result_ref, started_at, finished_at,
       retry_at
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

-- name: queue_run_failed
-- purpose: after run :run_id ended `failed` (same transaction): redeliver it as run :new_run_id due at :now (deadline :deadline) while its queue's maxAttempts allows, else send the message to the DLQ as entry :dead_letter_id with its envelope, every delivery's attempts and the last error
with r as (
    select r.run_id, r.project_id, r.workflow_id, r.version, r.input, r.idempotency_key, r.trigger_id, r.event_id,
           r.partition_key, r.queue, r.seq, r.delivery, coalesce(r.origin_run_id, r.run_id) as origin,
           r.dead_letter_id, r.failed_step, r.error_code, r.error_message, r.created_at,
           q.max_attempts, q.dead_letter_enabled
    from automation.runs r
    join automation.queues q on q.project_id = r.project_id and q.queue_id = r.queue
    where r.run_id = :run_id and r.state = 'failed'
), again as (
    insert into automation.runs (run_id, project_id, workflow_id, version, state, input, idempotency_key, trigger_id,
                                 event_id, partition_key, queue, next_wake_at, deadline_at, created_at, updated_at,
                                 seq, delivery, origin_run_id, dead_letter_id)
    select :new_run_id, project_id, workflow_id, version, 'pending', input, idempotency_key, trigger_id, event_id,
           partition_key, queue, :now, :deadline, :now, :now, seq, delivery + 1, origin, dead_letter_id
    from r
    where delivery < max_attempts
    returning run_id, project_id, delivery, origin_run_id
), again_ev as (
    insert into automation.run_events (run_id, project_id, at, kind, state, data)
    select run_id, project_id, :now, 'run.created', 'pending',
           jsonb_build_object('delivery', delivery, 'redelivery_of', :run_id::text, 'origin_run_id', origin_run_id)
    from again
), prev as (
    select d.envelope, d.envelope_bytes, d.history
    from automation.dead_letters d
    join r on d.dead_letter_id = r.dead_letter_id
), hist as (
    select coalesce(jsonb_agg(jsonb_build_object(
               'run_id', x.run_id, 'delivery', x.delivery, 'state', x.state, 'failed_step', x.failed_step,
               'error_code', x.error_code, 'error_message', x.error_message, 'created_at', x.created_at,
               'started_at', x.started_at, 'finished_at', x.finished_at,
               'attempts', coalesce((select jsonb_agg(jsonb_build_object(
                            'step_id', a.step_id, 'attempt', a.attempt, 'kind', a.kind, 'epoch', a.epoch,
                            'status', a.status, 'error_code', a.error_code, 'error_message', a.error_message,
                            'started_at', a.started_at, 'finished_at', a.finished_at)
                            order by a.started_at, a.kind, a.attempt)
                                     from automation.step_attempts a where a.run_id = x.run_id), '[]'::jsonb))
               order by x.delivery, x.seq), '[]'::jsonb) as h
    from r
    join automation.runs x on x.run_id = r.origin or x.origin_run_id = r.origin
), dead as (
    insert into automation.dead_letters (dead_letter_id, project_id, queue, trigger_id, workflow_id, event_id,
                                         envelope, envelope_bytes, error_code, error_message, attempts, created_at,
                                         step_id, run_id, version, partition_key, input, history, redrive_of)
    select :dead_letter_id, r.project_id, r.queue, r.trigger_id, r.workflow_id, r.event_id,
           coalesce((select envelope from prev),
                    (select e.envelope from automation.events e where e.event_id = r.event_id),
                    jsonb_build_object('id', r.origin, 'type', 'run', 'idempotency_key', r.idempotency_key,
                                       'partition_key', r.partition_key, 'occurred_at', r.created_at,
                                       'attempt', 1, 'data', r.input, 'trigger_id', r.trigger_id,
                                       'workflow_id', r.workflow_id)::text),
           (select envelope_bytes from prev),
           coalesce(r.error_code, 'E_RUN_FAILED'), r.error_message, r.delivery, :now, r.failed_step, r.run_id,
           r.version, r.partition_key, r.input,
           coalesce((select history from prev), '[]'::jsonb) || (select h from hist), r.dead_letter_id
    from r
    where r.delivery >= r.max_attempts and r.dead_letter_enabled
    returning dead_letter_id
)
select (select run_id from again) as redelivered, (select dead_letter_id from dead) as dead_letter_id;

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
