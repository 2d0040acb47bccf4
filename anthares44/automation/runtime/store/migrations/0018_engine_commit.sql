-- 0018_engine_commit: a step transition is one statement, one round trip (docs/runtime.md, "Performance"). The
-- interpreter sent BEGIN, the lease fence, each write and COMMIT separately: five round trips for an effect step,
-- ~0.2 ms of CPU each on both sides. `engine_commit` passes the fence and applies the batch's operations in order
-- inside one autocommit statement, so the transaction is the statement: all or nothing, as before.
--
-- Each operation kind is one function `automation.engine_op_<kind>(op jsonb)` reading its arguments from `op` by
-- name (jsonb_to_record); `engine_commit` calls it by name, so adding a kind is adding one function (and the
-- `Batch` method that appends it, engine/journal.py), never editing this dispatcher. An operation that must refuse
-- raises one of the SQLSTATEs below; the statement then writes nothing and the engine turns the code into its
-- exception:
--   A44LL  the lease is not (or no longer) held by the caller             -> LeaseLost
--   A44NR  the attempt to finish is not running any more (detail: why)    -> LeaseLost
--   A44IT  the state machine refuses the change (detail: from, hint: to)  -> E_ILLEGAL_TRANSITION

-- Lock the run if (owner, grant) still holds its lease, note the current step, defer this transaction's NOTIFYs to
-- the engine (0006; set before the fence's own update fires the triggers), then apply `ops`, a JSON array of
-- objects {"op": kind, ...arguments}. Returns the run's state as the fence found it.
create function automation.engine_commit(p_run_id text, p_owner text, p_grant integer, p_current_step text,
                                         p_now timestamptz, p_ops jsonb) returns text
    language plpgsql
    as $$
declare
    fenced text;
    op jsonb;
begin
    perform set_config('a44.notify', 'deferred', true);
    update automation.runs
    set current_step = coalesce(p_current_step, current_step), updated_at = p_now
    where run_id = p_run_id and lease_owner = p_owner and lease_grants = p_grant
    returning state into fenced;
    if not found then
        raise exception using errcode = 'A44LL', message = format('run %s is not leased to %s (grant %s)',
                                                                    p_run_id, p_owner, p_grant);
    end if;
    for op in select value from jsonb_array_elements(p_ops) loop
        execute format('select automation.%I($1)', 'engine_op_' || (op ->> 'op')) using op;
    end loop;
    return fenced;
end
$$;

-- Insert a running attempt row and log attempt.started. Returns the event id.
create function automation.engine_op_attempt_start(op jsonb) returns bigint
    language plpgsql
    as $$
declare
    ev bigint;
begin
    with x as (
        select * from jsonb_to_record(op) as x(run_id text, step_id text, attempt integer, key text,
                                               started_at timestamptz, epoch integer, kind text, project text,
                                               worker_id text, lease_grant integer)
    ), a as (
        insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, started_at, epoch,
                                              kind, project_id, worker_id, lease_grant)
        select run_id, step_id, attempt, key, 'running', started_at, epoch, kind, project, worker_id, lease_grant
        from x
        returning run_id, step_id, attempt, epoch, kind, project_id, started_at
    )
    insert into automation.run_events (run_id, project_id, at, kind, step_id, attempt, status, data)
    select run_id, project_id, started_at, 'attempt.started', step_id, attempt, 'running',
           jsonb_build_object('epoch', epoch, 'kind', kind)
    from a
    returning id into ev;
    return ev;
end
$$;

-- Log attempt.finished for an attempt row just finished or recorded. Returns the event id.
create function automation.engine_attempt_finished(a automation.step_attempts) returns bigint
    language plpgsql
    as $$
declare
    ev bigint;
begin
    insert into automation.run_events (run_id, project_id, at, kind, step_id, attempt, status, error_code, message,
                                       data)
    values (a.run_id, a.project_id, a.finished_at, 'attempt.finished', a.step_id, a.attempt, a.status, a.error_code,
            a.error_message,
            jsonb_build_object('epoch', a.epoch, 'kind', a.kind, 'retry_at', a.retry_at,
                               'duration_ms', round(extract(epoch from a.finished_at - a.started_at) * 1000)))
    returning id into ev;
    return ev;
end
$$;

-- Finish a running attempt (status, error, result or reference, retry due time) and log attempt.finished; raises
-- A44NR when it is not running any more (finished already, or taken over). Returns the event id.
create function automation.engine_op_attempt_finish(op jsonb) returns bigint
    language plpgsql
    as $$
declare
    a automation.step_attempts;
begin
    update automation.step_attempts s
    set status = x.status, error_code = x.error_code, error_message = x.error_message, result = x.result::jsonb,
        result_ref = x.result_ref, result_bytes = x.result_bytes, finished_at = x.finished_at, retry_at = x.retry_at
    from jsonb_to_record(op) as x(run_id text, step_id text, epoch integer, kind text, attempt integer,
                                  started_at timestamptz, status text, error_code text, error_message text,
                                  result text, result_ref text, result_bytes integer, finished_at timestamptz,
                                  retry_at timestamptz)
    where s.run_id = x.run_id and s.step_id = x.step_id and s.epoch = x.epoch and s.kind = x.kind
      and s.attempt = x.attempt and s.started_at = x.started_at and s.status = 'running'
    returning s.* into a;
    if not found then
        raise exception using errcode = 'A44NR',
            message = format('%s: attempt %s of %s is not running any more', op ->> 'run_id', op ->> 'attempt',
                             op ->> 'step_id');
    end if;
    return automation.engine_attempt_finished(a);
end
$$;

-- Insert an attempt already finished: started at started_at, finished at finished_at (skipped by `if`, failed by
-- deadline or expression, confirmed by a person, or a `pass` step run on the spot) and log it. Returns the event id.
create function automation.engine_op_attempt_record(op jsonb) returns bigint
    language plpgsql
    as $$
declare
    a automation.step_attempts;
begin
    insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, error_code,
                                          error_message, result, started_at, finished_at, epoch, kind,
                                          project_id, worker_id, lease_grant, result_bytes, retry_at, result_ref)
    select run_id, step_id, attempt, key, status, error_code, error_message, result::jsonb, started_at,
           finished_at, epoch, kind, project, worker_id, lease_grant, result_bytes, retry_at, result_ref
    from jsonb_to_record(op) as x(run_id text, step_id text, attempt integer, key text, started_at timestamptz,
                                  epoch integer, kind text, project text, worker_id text, lease_grant integer,
                                  status text, error_code text, error_message text, result text,
                                  result_bytes integer, retry_at timestamptz, result_ref text,
                                  finished_at timestamptz)
    returning * into a;
    return automation.engine_attempt_finished(a);
end
$$;

-- Move a leased run to state `to` only from one of `allowed_from`, optionally releasing the lease, and log
-- run.state; raises A44LL when the lease is gone, A44IT when the run's state is not in `allowed_from`.
create function automation.engine_op_run_transition(op jsonb) returns text
    language plpgsql
    as $$
declare
    prev_state text;
    new_state text;
begin
    with x as (
        select * from jsonb_to_record(op) as x(run_id text, owner text, "grant" integer, "to" text,
                                               allowed_from text[], next_wake_at timestamptz, release boolean,
                                               failed_step text, error_code text, message text, result text,
                                               summary text, finished boolean, now timestamptz)
    ), prev as (
        select r.run_id, r.state from automation.runs r, x
        where r.run_id = x.run_id and r.lease_owner = x.owner and r.lease_grants = x."grant"
        for update of r
    ), r as (
        update automation.runs r
        set state = x."to", next_wake_at = x.next_wake_at,
            lease_owner = case when x.release then null else r.lease_owner end,
            lease_deadline = case when x.release then null else r.lease_deadline end,
            failed_step = coalesce(x.failed_step, r.failed_step), error_code = coalesce(x.error_code, r.error_code),
            error_message = coalesce(x.message, r.error_message), result = coalesce(x.result::jsonb, r.result),
            summary = coalesce(x.summary::jsonb, r.summary),
            finished_at = case when x.finished then x.now else r.finished_at end, updated_at = x.now
        from prev, x
        where r.run_id = prev.run_id and prev.state = any(x.allowed_from)
        returning r.run_id, r.project_id, r.state, r.next_wake_at, prev.state as prev_state
    ), ev as (
        insert into automation.run_events (run_id, project_id, at, kind, state, step_id, error_code, message, data)
        select r.run_id, r.project_id, x.now, 'run.state', r.state, x.failed_step, x.error_code, x.message,
               jsonb_build_object('from', r.prev_state, 'next_wake_at', r.next_wake_at)
        from r, x
        where r.prev_state <> r.state
    )
    select (select state from prev), (select state from r) into prev_state, new_state;
    if new_state is null then
        if prev_state is null then
            raise exception using errcode = 'A44LL', message = format('run %s is not leased to %s (grant %s)',
                                                                        op ->> 'run_id', op ->> 'owner',
                                                                        op ->> 'grant');
        end if;
        raise exception using errcode = 'A44IT', detail = prev_state, hint = op ->> 'to',
            message = format('run %s cannot move from %s to %s', op ->> 'run_id', prev_state, op ->> 'to');
    end if;
    return new_state;
end
$$;

-- After run run_id ended `failed` (same transaction): redeliver it as run new_run_id due at now (deadline
-- `deadline`) while its queue's maxAttempts allows, else send the message to the DLQ as entry dead_letter_id with
-- its envelope, every delivery's attempts and the last error. Nothing for a run of no queue. Returns the redelivered
-- run id, if any.
create function automation.engine_op_queue_run_failed(op jsonb) returns text
    language plpgsql
    as $$
declare
    redelivered text;
    dead_letter text;
begin
    with x as (
        select * from jsonb_to_record(op) as x(run_id text, new_run_id text, now timestamptz, deadline timestamptz,
                                               dead_letter_id text, permanent boolean)
    ), r as (
        select r.run_id, r.project_id, r.workflow_id, r.version, r.input, r.idempotency_key, r.trigger_id, r.event_id,
               r.partition_key, r.queue, r.seq, r.delivery, coalesce(r.origin_run_id, r.run_id) as origin,
               r.dead_letter_id, r.failed_step, r.error_code, r.error_message, r.created_at,
               q.max_attempts, q.dead_letter_enabled
        from automation.runs r
        join automation.queues q on q.project_id = r.project_id and q.queue_id = r.queue
        join x on r.run_id = x.run_id
        where r.state = 'failed'
    ), again as (
        insert into automation.runs (run_id, project_id, workflow_id, version, state, input, idempotency_key,
                                     trigger_id, event_id, partition_key, queue, next_wake_at, deadline_at, created_at,
                                     updated_at, seq, delivery, origin_run_id, dead_letter_id)
        select x.new_run_id, r.project_id, r.workflow_id, r.version, 'pending', r.input, r.idempotency_key,
               r.trigger_id, r.event_id, r.partition_key, r.queue, x.now, x.deadline, x.now, x.now, r.seq,
               r.delivery + 1, r.origin, r.dead_letter_id
        from r, x
        where r.delivery < r.max_attempts and not coalesce(x.permanent, false)
        returning run_id, project_id, delivery, origin_run_id
    ), again_ev as (
        insert into automation.run_events (run_id, project_id, at, kind, state, data)
        select again.run_id, project_id, x.now, 'run.created', 'pending',
               jsonb_build_object('delivery', delivery, 'redelivery_of', x.run_id, 'origin_run_id', origin_run_id)
        from again, x
    ), prev as (
        select d.envelope, d.envelope_bytes, d.history
        from automation.dead_letters d
        join r on d.dead_letter_id = r.dead_letter_id
    ), hist as (
        select coalesce(jsonb_agg(jsonb_build_object(
                   'run_id', y.run_id, 'delivery', y.delivery, 'state', y.state, 'failed_step', y.failed_step,
                   'error_code', y.error_code, 'error_message', y.error_message, 'created_at', y.created_at,
                   'started_at', y.started_at, 'finished_at', y.finished_at,
                   'attempts', coalesce((select jsonb_agg(jsonb_build_object(
                                'step_id', a.step_id, 'attempt', a.attempt, 'kind', a.kind, 'epoch', a.epoch,
                                'status', a.status, 'error_code', a.error_code, 'error_message', a.error_message,
                                'started_at', a.started_at, 'finished_at', a.finished_at)
                                order by a.started_at, a.kind, a.attempt)
                                         from automation.step_attempts a where a.run_id = y.run_id), '[]'::jsonb))
                   order by y.delivery, y.seq), '[]'::jsonb) as h
        from r
        join automation.runs y on y.run_id = r.origin or y.origin_run_id = r.origin
    ), dead as (
        insert into automation.dead_letters (dead_letter_id, project_id, queue, trigger_id, workflow_id, event_id,
                                             envelope, envelope_bytes, error_code, error_message, attempts, created_at,
                                             step_id, run_id, version, partition_key, input, history, redrive_of)
        select x.dead_letter_id, r.project_id, r.queue, r.trigger_id, r.workflow_id, r.event_id,
               coalesce((select envelope from prev),
                        (select e.envelope from automation.events e where e.event_id = r.event_id),
                        jsonb_build_object('id', r.origin, 'type', 'run', 'idempotency_key', r.idempotency_key,
                                           'partition_key', r.partition_key, 'occurred_at', r.created_at,
                                           'attempt', 1, 'data', r.input, 'trigger_id', r.trigger_id,
                                           'workflow_id', r.workflow_id)::text),
               (select envelope_bytes from prev),
               coalesce(r.error_code, 'E_RUN_FAILED'), r.error_message, r.delivery, x.now, r.failed_step, r.run_id,
               r.version, r.partition_key, r.input,
               coalesce((select history from prev), '[]'::jsonb) || (select h from hist), r.dead_letter_id
        from r, x
        where (r.delivery >= r.max_attempts or coalesce(x.permanent, false)) and r.dead_letter_enabled
        returning dead_letter_id
    )
    select (select run_id from again), (select dead_letter_id from dead) into redelivered, dead_letter;
    return redelivered;
end
$$;

-- Append one event to a run's log. Returns its id.
create function automation.engine_op_run_event(op jsonb) returns bigint
    language plpgsql
    as $$
declare
    ev bigint;
begin
    insert into automation.run_events (run_id, project_id, at, kind, state, step_id, attempt, status, error_code,
                                       message, data)
    select run_id, project, at, kind, state, step_id, attempt, status, error_code, message, data::jsonb
    from jsonb_to_record(op) as x(run_id text, project text, at timestamptz, kind text, state text, step_id text,
                                  attempt integer, status text, error_code text, message text, data text)
    returning id into ev;
    return ev;
end
$$;
