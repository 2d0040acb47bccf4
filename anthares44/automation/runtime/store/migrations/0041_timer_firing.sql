-- 0041_timer_firing: durable timers fire in
-- sets (§19, docs/timers.md "Firing at volume"). Until now a timer fired only inside a visit: a claim (the lease,
-- serialised with every daemon's claims), loading the run's history, the fire's commit -- about 2-4 ms of database work and a round trip each, so 100,000 timers due in the same 10 s
-- queued behind one another (bench/bench_timers.py: ~300 fires/s on this machine, seconds late at 5,000).
--
-- `timer_fire_due` fires the due sleeps of released runs in one statement: the open sleeps whose stored instant
-- has come (the partial index below, in due order), of runs no worker holds (`lease_owner is null`, `sleeping`, no
-- cancel requested), each run's row locked FOR UPDATE SKIP LOCKED -- the lock the claim, the engine's fence and
-- `timer_move` take -- and the attempt finished only while still `running` with the instant it was read with. So
-- two daemons firing at once, a claim, a visit's commit and a person's wake or reschedule each see the timer
-- either open or fired, never both: it fires once. The attempt ends `succeeded` with {"due_at", "late_ms"} as
-- the visit's fire writes it (journal.Batch.sleep_fire) and logs `attempt.finished`; the run stays `sleeping`
-- and due (its next_wake_at is the instant or earlier), so the next claim drives its next step.

create index step_attempts_open_timers on automation.step_attempts (due_at) where status = 'running' and due_at is not null;

-- Python's datetime.isoformat() of a UTC instant: microseconds only when there are some.
create function automation.iso_instant(t timestamptz) returns text
    language sql stable
    as $$
select to_char(t at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
       || case when extract(microseconds from t)::bigint % 1000000 = 0 then ''
               else to_char(t at time zone 'UTC', '.US') end
       || '+00:00'
$$;

-- Fire at most p_limit due sleeps of released runs at p_now. Returns how many fired. One statement, set-based
-- (bench/bench_timers.py: a FOR loop calling engine_attempt_finished per row, with a NOTIFY per event, cost ~0.45 ms
-- a fire under load; this ~0.05 ms):
--   * the attempt.finished events are one INSERT of the fired rows, the columns of engine_attempt_finished; their
--     NOTIFYs are deferred as the claim's are (0006): the run's next visit, which follows, notifies the run;
--   * the finished rows come back as columns, never as a whole row of the partitioned table (a whole-row
--     RETURNING in a data-modifying CTE was seen to crash a backend under load);
--   * the due attempts are locked as they are read (SKIP LOCKED): two daemons' batches in flight at once take
--     disjoint timers, in parallel, instead of the second finding the first one's runs locked and firing nothing;
--   * the UPDATE finds each attempt by its primary key (hash and merge joins off, restored after, as lease_claim
--     does with sorts): a hash join read every running attempt of the table once per batch.
create function automation.timer_fire_due(p_now timestamptz, p_limit integer) returns integer
    language plpgsql
    as $$
declare
    n integer;
    hashing text := current_setting('enable_hashjoin');
    merging text := current_setting('enable_mergejoin');
begin
    perform set_config('a44.notify', 'deferred', true);
    perform set_config('enable_hashjoin', 'off', true);
    perform set_config('enable_mergejoin', 'off', true);
    with due as (
        select s.run_id, s.step_id, s.epoch, s.kind, s.attempt, s.started_at, s.due_at
        from automation.step_attempts s
        where s.status = 'running' and s.due_at is not null and s.due_at <= p_now
        order by s.due_at
        limit p_limit
        for update of s skip locked     -- another daemon's batch in flight: this one takes the next timers
    ), mine as (
        select d.*, '{"due_at":"' || automation.iso_instant(d.due_at) || '","late_ms":'
                    || greatest(0, round(extract(epoch from p_now - d.due_at) * 1000))::bigint || '}' as result
        from due d
        cross join lateral (select r.run_id from automation.runs r
                            where r.run_id = d.run_id and r.epoch = d.epoch and r.lease_owner is null
                              and r.state = 'sleeping' and r.cancel_requested_at is null
                            for update skip locked) r
    ), fired as (
        update automation.step_attempts s
        set status = 'succeeded', finished_at = p_now, result = f.result::jsonb, result_bytes = octet_length(f.result)
        from mine f
        where s.run_id = f.run_id and s.step_id = f.step_id and s.epoch = f.epoch and s.kind = f.kind
          and s.attempt = f.attempt and s.started_at = f.started_at and s.status = 'running' and s.due_at = f.due_at
        returning s.run_id, s.project_id, s.step_id, s.attempt, s.status, s.epoch, s.kind, s.started_at
    ), logged as (
        insert into automation.run_events (run_id, project_id, at, kind, step_id, attempt, status, error_code,
                                           message, data)
        select run_id, project_id, p_now, 'attempt.finished', step_id, attempt, status, null, null,
               jsonb_build_object('epoch', epoch, 'kind', kind, 'retry_at', null,
                                  'duration_ms', round(extract(epoch from p_now - started_at) * 1000))
        from fired
        returning 1
    )
    select count(*) into n from logged;
    perform set_config('enable_hashjoin', hashing, true);
    perform set_config('enable_mergejoin', merging, true);
    return n;
end
$$;
