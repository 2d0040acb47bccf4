-- 0028_fence_lock: a transition that moves the run writes its row once. engine_commit's fence used to rewrite the
-- run row (current_step, updated_at) and the run_transition operation of the same batch rewrote it again: two row
-- versions, each with its index entries when not HOT, for every transition that ends, parks or releases a run
-- (a 3-step `pass` run: 3 updates of its row, now 2; a 3-step run with effects: 6, now 5). When the batch has a
-- run_transition, the fence now only locks the row (`for update`, the same lease check and A44LL) and the
-- transition sets current_step with the rest; a batch without one is fenced as before. Same arguments, results,
-- refusals and column values as 0018: current_step and updated_at end as they did.

create or replace function automation.engine_commit(p_run_id text, p_owner text, p_grant integer,
                                                    p_current_step text, p_now timestamptz, p_ops jsonb)
    returns text
    language plpgsql
    as $$
declare
    fenced text;
    op jsonb;
    moves boolean := p_ops @> '[{"op": "run_transition"}]';
begin
    perform set_config('a44.notify', 'deferred', true);
    if moves then
        select state into fenced from automation.runs
        where run_id = p_run_id and lease_owner = p_owner and lease_grants = p_grant
        for update;
    else
        update automation.runs
        set current_step = coalesce(p_current_step, current_step), updated_at = p_now
        where run_id = p_run_id and lease_owner = p_owner and lease_grants = p_grant
        returning state into fenced;
    end if;
    if not found then
        raise exception using errcode = 'A44LL', message = format('run %s is not leased to %s (grant %s)',
                                                                    p_run_id, p_owner, p_grant);
    end if;
    for op in select value from jsonb_array_elements(p_ops) loop
        if moves and op ->> 'op' = 'run_transition' then
            op := op || jsonb_build_object('current_step', p_current_step);
        end if;
        execute format('select automation.%I($1)', 'engine_op_' || (op ->> 'op')) using op;
    end loop;
    return fenced;
end
$$;

-- As 0018, and current_step (when given) set with the rest of the row.
create or replace function automation.engine_op_run_transition(op jsonb) returns text
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
                                               summary text, finished boolean, now timestamptz, current_step text)
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
            summary = coalesce(x.summary::jsonb, r.summary), current_step = coalesce(x.current_step, r.current_step),
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
