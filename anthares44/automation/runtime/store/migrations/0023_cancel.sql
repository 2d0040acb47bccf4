-- 0023_cancel: a person cancels a run (docs/states.md, "Cancel"). The request is written on the run (who, why,
-- whether to compensate, when; error_code E_RUN_CANCELLED marks it for a worker that claims the run later) with a
-- `run.cancel_requested` event. A run no worker holds is cancelled in the same statement (its running attempt, a
-- sleep, ends `cancelled`); a held run is the holder's to stop at its next safe point, told on channel
-- a44_run_cancel (payload: the run id). With `compensate` an unheld run is made due instead, so a worker runs the
-- compensations of its completed steps before it ends `cancelled`.

alter table automation.step_attempts drop constraint step_attempts_status_check;
alter table automation.step_attempts add constraint step_attempts_status_check check (status in ('running',
    'succeeded', 'failed', 'timeout', 'skipped', 'compensated', 'compensation_failed', 'lease_expired', 'cancelled'));

alter table automation.runs
    add column cancel_requested_at timestamptz,
    add column cancelled_by        text,
    add column cancel_reason       text,
    add column cancel_compensate   boolean;

-- Carry out the cancel request recorded on run p_run_id as far as the database alone can: cancel it now when no
-- worker holds it and nothing is to compensate, else make it due (compensate) or leave it to its holder, whom
-- p_notify tells. Returns (outcome, state): 'cancelled', 'requested' (a worker finishes it) or 'none' (no
-- request, or the run is finished).
create function automation.run_cancel_settle(p_run_id text, p_now timestamptz, p_notify boolean)
    returns table (outcome text, state text, lease_owner text)
    language plpgsql
    as $$
declare
    r automation.runs;
    a automation.step_attempts;
begin
    select * into r from automation.runs x where x.run_id = p_run_id for update;
    if not found or r.cancel_requested_at is null
       or r.state in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled') then
        return query select 'none'::text, r.state, r.lease_owner;
        return;
    end if;
    if r.lease_owner is not null or r.state = 'compensating' then
        if p_notify and r.lease_owner is not null then
            perform pg_notify('a44_run_cancel', r.run_id);
        end if;
        return query select 'requested'::text, r.state, r.lease_owner;
        return;
    end if;
    if r.cancel_compensate then        -- a worker claims it now and compensates (a parked run is released first)
        update automation.runs x
        set state = case when r.state = 'awaiting_confirmation' then 'pending' else r.state end,
            next_wake_at = p_now, updated_at = p_now
        where x.run_id = r.run_id;
        if r.state = 'awaiting_confirmation' then
            insert into automation.run_events (run_id, project_id, at, kind, state, data)
            values (r.run_id, r.project_id, p_now, 'run.state', 'pending',
                    jsonb_build_object('from', r.state, 'reason', 'cancel'));
        end if;
        return query select 'requested'::text, (case when r.state = 'awaiting_confirmation' then 'pending'
                                                      else r.state end), null::text;
        return;
    end if;
    for a in update automation.step_attempts s
             set status = 'cancelled', error_code = 'E_RUN_CANCELLED', error_message = r.error_message,
                 finished_at = p_now
             where s.run_id = r.run_id and s.epoch = r.epoch and s.status = 'running'
             returning s.* loop
        perform automation.engine_attempt_finished(a);
    end loop;
    update automation.runs x
    set state = 'cancelled', next_wake_at = null, finished_at = p_now, updated_at = p_now
    where x.run_id = r.run_id;
    insert into automation.run_events (run_id, project_id, at, kind, state, error_code, message, data)
    values (r.run_id, r.project_id, p_now, 'run.state', 'cancelled', 'E_RUN_CANCELLED', r.error_message,
            jsonb_build_object('from', r.state, 'by', r.cancelled_by, 'reason', r.cancel_reason));
    return query select 'cancelled'::text, 'cancelled'::text, null::text;
end
$$;

-- Record a cancel request on run p_run_id of project p_project by p_by for p_reason (optionally compensating) and
-- settle it (run_cancel_settle). Returns (outcome, state, prev_state): 'not_found', 'already' (cancelled),
-- 'finished' (another terminal state), 'compensating' (compensating after a failure: it ends as that failure
-- says), 'cancelled' or 'requested'. A second request while one is pending keeps the first one's who and why.
create function automation.run_cancel(p_run_id text, p_project text, p_by text, p_reason text,
                                      p_compensate boolean, p_message text, p_now timestamptz)
    returns table (outcome text, state text, prev_state text)
    language plpgsql
    as $$
declare
    r automation.runs;
    settled record;
begin
    select * into r from automation.runs x where x.run_id = p_run_id and x.project_id = p_project for update;
    if not found then
        return query select 'not_found'::text, null::text, null::text;
        return;
    end if;
    if r.state = 'cancelled' then
        return query select 'already'::text, r.state, r.state;
        return;
    end if;
    if r.state in ('succeeded', 'partial', 'failed', 'compensation_failed') then
        return query select 'finished'::text, r.state, r.state;
        return;
    end if;
    if r.state = 'compensating' and r.cancel_requested_at is null then
        return query select 'compensating'::text, r.state, r.state;
        return;
    end if;
    if r.cancel_requested_at is null then
        update automation.runs x
        set cancel_requested_at = p_now, cancelled_by = p_by, cancel_reason = p_reason,
            cancel_compensate = p_compensate, error_code = 'E_RUN_CANCELLED', error_message = p_message,
            updated_at = p_now
        where x.run_id = r.run_id;
        insert into automation.run_events (run_id, project_id, at, kind, state, message, data)
        values (r.run_id, r.project_id, p_now, 'run.cancel_requested', r.state, p_message,
                jsonb_build_object('by', p_by, 'reason', p_reason, 'compensate', p_compensate));
    end if;
    select * into settled from automation.run_cancel_settle(r.run_id, p_now, true);
    return query select settled.outcome, settled.state, r.state;
end
$$;
