-- 0033_waits: a run waits for a signal sent to it (§20, docs/waits.md). One row per wait (run_waits: a `wait`
-- step of one epoch) and one per signal (run_signals, the run's inbox). A wait has exactly one outcome: it leaves
-- `open` once, by a conditional update `where state = 'open'` (satisfied by a signal, timed out by the engine at
-- its instant, cancelled when its run finishes), and the signal it consumes is marked consumed in the same
-- transaction. Both sides that can meet (a signal arriving, a wait opening) lock the run's row first, so they
-- serialize: a signal sent before the wait opens is buffered and consumed by the open, one sent after finds the
-- wait and closes it; neither is lost, none consumed twice.
create table automation.run_signals (
    seq             bigint generated always as identity primary key,
    run_id          text        not null,
    name            text        not null,
    data            jsonb,
    idempotency_key text,
    sent_by         text,
    received_at     timestamptz not null,
    consumed_epoch  integer,
    consumed_step   text,
    consumed_at     timestamptz,
    constraint run_signals_key unique (run_id, idempotency_key)
);
create index run_signals_unconsumed_idx on automation.run_signals (run_id, name, seq) where consumed_at is null;

create table automation.run_waits (
    run_id       text        not null,
    epoch        integer     not null,
    step_id      text        not null,
    kind         text        not null check (kind in ('signal')),
    key          text        not null,                       -- the signal's name
    opened_at    timestamptz not null,
    timeout_at   timestamptz not null,
    state        text        not null default 'open'
                             check (state in ('open', 'satisfied', 'timed_out', 'cancelled')),
    output       jsonb,                                      -- the step's output once satisfied
    satisfied_by text,                                       -- signal:<seq>
    closed_at    timestamptz,
    resumed_at   timestamptz,                                -- the step finished from this outcome
    constraint run_waits_pkey primary key (run_id, epoch, step_id)
);
create index run_waits_open_idx on automation.run_waits (run_id, kind, key, opened_at) where state = 'open';

-- Open the wait of step p_step (idempotent: a second open returns the first one's row) and consume the oldest
-- unconsumed signal of its name, if one is buffered. The run's row is locked first: a signal being sent commits
-- before (and is consumed here) or after (and finds this wait open).
create function automation.wait_open(p_run text, p_epoch integer, p_step text, p_kind text, p_key text,
                                     p_timeout_at timestamptz, p_now timestamptz)
    returns table (state text, output jsonb, timeout_at timestamptz)
    language plpgsql
    as $$
declare
    s record;
begin
    perform 1 from automation.runs r where r.run_id = p_run for update;
    insert into automation.run_waits (run_id, epoch, step_id, kind, key, opened_at, timeout_at)
    values (p_run, p_epoch, p_step, p_kind, p_key, p_now, p_timeout_at)
    on conflict on constraint run_waits_pkey do nothing;
    if found then
        select g.seq, g.name, g.data into s from automation.run_signals g
        where g.run_id = p_run and g.name = p_key and g.consumed_at is null
        order by g.seq limit 1 for update;
        if found then
            perform automation.wait_satisfy(p_run, p_epoch, p_step, s.seq, s.name, s.data, p_now);
        end if;
    end if;
    return query select w.state, w.output, w.timeout_at from automation.run_waits w
                 where w.run_id = p_run and w.epoch = p_epoch and w.step_id = p_step;
end
$$;

-- The one way a wait is satisfied by a signal: the wait closes (only if still open) and the signal is consumed by
-- it, together; false when the wait was no longer open (the signal stays buffered).
create function automation.wait_satisfy(p_run text, p_epoch integer, p_step text, p_seq bigint, p_name text,
                                        p_data jsonb, p_now timestamptz)
    returns boolean
    language plpgsql
    as $$
begin
    update automation.run_waits w
    set state = 'satisfied', closed_at = p_now, satisfied_by = 'signal:' || p_seq,
        output = jsonb_build_object('kind', 'signal', 'signal', jsonb_build_object('name', p_name, 'data', p_data))
    where w.run_id = p_run and w.epoch = p_epoch and w.step_id = p_step and w.state = 'open';
    if not found then
        return false;
    end if;
    update automation.run_signals g set consumed_epoch = p_epoch, consumed_step = p_step, consumed_at = p_now
    where g.seq = p_seq and g.consumed_at is null;
    if not found then
        raise exception 'signal % of run % was consumed twice', p_seq, p_run;
    end if;
    return true;
end
$$;

-- The engine at or after the wait's instant: it times out unless something closed it first. Returns the row.
create function automation.wait_timeout(p_run text, p_epoch integer, p_step text, p_now timestamptz)
    returns table (state text, output jsonb, timeout_at timestamptz)
    language plpgsql
    as $$
begin
    update automation.run_waits w set state = 'timed_out', closed_at = p_now
    where w.run_id = p_run and w.epoch = p_epoch and w.step_id = p_step and w.state = 'open'
      and w.timeout_at <= p_now;
    return query select w.state, w.output, w.timeout_at from automation.run_waits w
                 where w.run_id = p_run and w.epoch = p_epoch and w.step_id = p_step;
end
$$;

-- A signal sent to run p_run of project p_project. Outcomes: unknown (no such run), finished (the run is over:
-- `state` says how), duplicate (this idempotency key was sent before: its seq), delivered (an open wait consumed it;
-- the run is due now), buffered (no wait open on its name: the next one consumes it, in order).
create function automation.run_signal(p_project text, p_run text, p_name text, p_data jsonb, p_key text,
                                      p_by text, p_now timestamptz)
    returns table (outcome text, state text, seq bigint)
    language plpgsql
    as $$
declare
    st text;
    n bigint;
    w record;
begin
    select r.state into st from automation.runs r where r.run_id = p_run and r.project_id = p_project for update;
    if not found then
        return query select 'unknown'::text, null::text, null::bigint;
        return;
    end if;
    if p_key is not null then
        select g.seq into n from automation.run_signals g where g.run_id = p_run and g.idempotency_key = p_key;
        if found then
            return query select 'duplicate'::text, st, n;
            return;
        end if;
    end if;
    if st in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled') then
        return query select 'finished'::text, st, null::bigint;
        return;
    end if;
    insert into automation.run_signals (run_id, name, data, idempotency_key, sent_by, received_at)
    values (p_run, p_name, p_data, p_key, p_by, p_now)
    returning run_signals.seq into n;
    select v.epoch, v.step_id into w from automation.run_waits v
    where v.run_id = p_run and v.kind = 'signal' and v.key = p_name and v.state = 'open'
    order by v.opened_at, v.step_id limit 1 for update;
    if found and automation.wait_satisfy(p_run, w.epoch, w.step_id, n, p_name, p_data, p_now) then
        update automation.runs r set next_wake_at = least(r.next_wake_at, p_now)
        where r.run_id = p_run and r.state = 'waiting' and r.lease_owner is null;
        return query select 'delivered'::text, st, n;
        return;
    end if;
    return query select 'buffered'::text, st, n;
end
$$;

-- Appended after the transition that releases a run to `waiting` (engine_commit): a wait of this epoch closed
-- since the visit looked at it (a signal committed after the open, before this release) makes the run due now.
-- The signal locked the run's row before closing the wait, so it committed before this commit's fence (and is
-- seen here) or after it (and sees the run `waiting` and wakes it itself).
create function automation.engine_op_wait_check(op jsonb) returns void
    language plpgsql
    as $$
declare
    x record;
begin
    select * into x from jsonb_to_record(op) as r(run_id text, epoch integer, "now" timestamptz);
    if exists (select 1 from automation.run_waits w where w.run_id = x.run_id and w.epoch = x.epoch
               and w.state <> 'open' and w.resumed_at is null) then
        update automation.runs set next_wake_at = x."now"
        where run_id = x.run_id and state = 'waiting' and lease_owner is null;
        if found then   -- engine_commit defers the trigger's notify with the release's due time: tell it now
            perform pg_notify('a44_runs_due', (floor(extract(epoch from x."now") * 1000))::bigint::text);
        end if;
    end if;
end
$$;

-- The wait step finished from its wait's outcome (in the commit that finishes the attempt).
create function automation.engine_op_wait_resumed(op jsonb) returns void
    language plpgsql
    as $$
declare
    x record;
begin
    select * into x from jsonb_to_record(op) as r(run_id text, epoch integer, step_id text, "now" timestamptz);
    update automation.run_waits w set resumed_at = x."now"
    where w.run_id = x.run_id and w.epoch = x.epoch and w.step_id = x.step_id and w.resumed_at is null;
end
$$;

-- A run that finishes (cancelled, failed, past its deadline...) closes its open waits `cancelled`: a signal sent
-- later is refused (the run is finished), never consumed by a wait nobody resumes.
create function automation.run_waits_close() returns trigger
    language plpgsql
    as $$
begin
    update automation.run_waits w set state = 'cancelled', closed_at = new.updated_at
    where w.run_id = new.run_id and w.state = 'open';
    return null;
end
$$;

create trigger runs_close_waits
    after update of state on automation.runs
    for each row
    when (new.state in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')
          and old.state is distinct from new.state)
    execute function automation.run_waits_close();
