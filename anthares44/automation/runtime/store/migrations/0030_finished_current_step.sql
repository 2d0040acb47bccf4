-- 0030_finished_current_step: a run that ends (succeeded, partial, failed, compensation_failed, cancelled) has no
-- current step: the transition that finishes it clears `current_step` (until now it kept the last step or partition
-- started, so a finished `since` run showed `load[2026-07-03]` as where it stood). `failed_step` says where a
-- failed run stopped. As 0028 otherwise.
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
            summary = coalesce(x.summary::jsonb, r.summary), current_step = case when x.finished then null else coalesce(x.current_step, r.current_step) end,
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
