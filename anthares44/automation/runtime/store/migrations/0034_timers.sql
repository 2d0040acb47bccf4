-- 0034_timers: durable timers (§19, docs/timers.md). A sleep's due instant is computed once, when the sleep opens,
-- and stored on its `running` attempt (`due_at`); every later look (a new lease, a restart, a redeploy) reads it
-- back instead of computing it again, and a replay carries it over with the attempt it reuses.
--
-- Firing is the engine finishing that attempt `succeeded` in an `engine_commit` (the lease fence, one conditional
-- transition): `engine_op_sleep_fire` first checks the stored instant is still the one the engine read, so a
-- person's wake or reschedule committed in between makes the fire write nothing (A44NR) instead of ending the
-- sleep twice. `timer_move` is the person's side: under the run's row lock (the one the fence takes), it moves the
-- instant of a sleep still `running` and not yet due, logs who and why, and makes a released run due then.

alter table automation.step_attempts add column due_at timestamptz;

-- A sleep opens: store its due instant on the attempt just started in the same batch.
create function automation.engine_op_sleep_open(op jsonb) returns void
    language plpgsql
    as $$
begin
    update automation.step_attempts s set due_at = x.due_at
    from jsonb_to_record(op) as x(run_id text, step_id text, epoch integer, attempt integer, due_at timestamptz)
    where s.run_id = x.run_id and s.step_id = x.step_id and s.epoch = x.epoch and s.kind = 'action'
      and s.attempt = x.attempt and s.status = 'running';
    if not found then
        raise exception using errcode = 'A44NR',
            message = format('%s: sleep %s is not running', op ->> 'run_id', op ->> 'step_id');
    end if;
end
$$;

-- A sleep fires: its attempt is still running with the instant the engine read (else A44NR: a wake or reschedule
-- moved it meanwhile, the next look reads the new one). The finish itself follows as `attempt_finish`.
create function automation.engine_op_sleep_fire(op jsonb) returns void
    language plpgsql
    as $$
begin
    perform 1
    from automation.step_attempts s, jsonb_to_record(op) as x(run_id text, step_id text, epoch integer,
                                                               attempt integer, due_at timestamptz)
    where s.run_id = x.run_id and s.step_id = x.step_id and s.epoch = x.epoch and s.kind = 'action'
      and s.attempt = x.attempt and s.status = 'running' and s.due_at = x.due_at;
    if not found then
        raise exception using errcode = 'A44NR',
            message = format('%s: sleep %s was woken, rescheduled or ended meanwhile', op ->> 'run_id',
                             op ->> 'step_id');
    end if;
end
$$;

-- After a release to `sleeping`: due no later than the earliest stored instant of the run's open sleeps, so a
-- wake committed while the run was leased (its visit read the old instant) is not lost.
create function automation.engine_op_timer_check(op jsonb) returns void
    language plpgsql
    as $$
begin
    update automation.runs r
    set next_wake_at = least(r.next_wake_at, t.due)
    from (select min(s.due_at) as due
          from automation.step_attempts s join automation.runs q on q.run_id = s.run_id and q.epoch = s.epoch
          where s.run_id = op ->> 'run_id' and s.status = 'running' and s.due_at is not null) t
    where r.run_id = op ->> 'run_id' and t.due is not null and r.lease_owner is null;
end
$$;

-- A person moves the due instant of sleep `p_step` of run `p_run` to `p_due` (`timer.woken`: now; `timer.rescheduled`:
-- an instant) at `p_now`. Returns 'moved', or why not: 'no_run', 'not_sleeping' (no running sleep of that step in
-- the run's epoch), 'due' (its instant has come: the timer fires, the move would be a second outcome) or
-- 'past_deadline' (p_due after the run's deadline_at). The run's row lock orders it with the engine's fence.
create function automation.timer_move(p_project text, p_run text, p_step text, p_due timestamptz, p_now timestamptz,
                                      p_kind text, p_who text, p_reason text) returns text
    language plpgsql
    as $$
declare
    r automation.runs;
    a automation.step_attempts;
begin
    select * into r from automation.runs where run_id = p_run and project_id = p_project for update;
    if not found then
        return 'no_run';
    end if;
    select * into a from automation.step_attempts
    where run_id = p_run and step_id = p_step and epoch = r.epoch and kind = 'action' and status = 'running'
      and due_at is not null
    for update;
    if not found or r.state in ('succeeded', 'partial', 'failed', 'cancelled') then
        return 'not_sleeping';
    end if;
    if a.due_at <= p_now then
        return 'due';
    end if;
    if r.deadline_at is not null and p_due > r.deadline_at then
        return 'past_deadline';
    end if;
    update automation.step_attempts set due_at = p_due
    where run_id = a.run_id and step_id = a.step_id and epoch = a.epoch and kind = a.kind and attempt = a.attempt;
    insert into automation.run_events (run_id, project_id, at, kind, step_id, attempt, status, data)
    values (r.run_id, r.project_id, p_now, p_kind, p_step, a.attempt, 'running',
            jsonb_build_object('epoch', r.epoch, 'from', a.due_at, 'due_at', p_due, 'by', p_who, 'reason', p_reason));
    if r.lease_owner is null and r.state = 'sleeping' then
        -- released: due at the new instant (a later one wakes it early; the look finds it not due and sleeps on)
        update automation.runs set next_wake_at = least(next_wake_at, p_due), updated_at = p_now
        where run_id = r.run_id;
        perform pg_notify('a44_runs_due', (floor(extract(epoch from least(p_due, p_now)) * 1000))::bigint::text);
    end if;
    return 'moved';
end
$$;

-- The timer-lateness histogram (automation_timer_lateness_seconds) reads fired sleeps by when they fired.
create index step_attempts_fired_timers on automation.step_attempts (finished_at) where due_at is not null;
