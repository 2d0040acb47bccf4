-- 0035_event_waits: a run waits for an event correlated with it (§20, docs/waits.md "Event waits").
--
-- Events get an ingestion sequence (events.seq) and a run records, at its creation, the highest sequence then
-- committed (runs.event_seq, a column default: every path that creates a run records it). Publishing a workflow
-- records the correlation programs its event waits use (event_wait_programs, a trigger on workflow_versions);
-- ingestion evaluates them on each event of the type and stores one row per (program, value) in
-- event_correlations, numbered (cseq) under the correlation value's advisory lock. A wait's look takes the same
-- lock, so per correlation value the rows are numbered in commit order and a wait reads them once, in order,
-- from its cursor: an event committed before the look is found by it, one committed after wakes the run
-- (ingestion locks the rows of the runs whose open waits match), and the release's wait_check covers one
-- committed between the look and the release. The engine's look alone closes an event wait (satisfied, or
-- timed out at its instant), by the conditional update of run_waits that signals use: one outcome.

alter table automation.events add column seq bigint generated always as identity;
create unique index events_seq_idx on automation.events (seq);

-- The highest event sequence committed (seen by the calling statement): a run's watermark at its creation.
create function automation.events_watermark() returns bigint
    language sql stable
    as $$ select coalesce(max(seq), 0) from automation.events $$;

alter table automation.runs add column event_seq bigint default automation.events_watermark();

alter table automation.run_waits drop constraint run_waits_kind_check;
alter table automation.run_waits add constraint run_waits_kind_check check (kind in ('signal', 'event', 'any'));

-- The correlation programs (CEL over the envelope) of the event waits of published workflows, per event type:
-- what ingestion evaluates on each event of that type. program_hash is md5 of the CEL text ('none': a broadcast
-- wait, `correlate: none`, whose value is '').
create table automation.event_wait_programs (
    project_id   text        not null,
    type         text        not null,
    program_hash text        not null,
    program      jsonb,                                       -- Expr IR {cel, program}; null for 'none'
    constraint event_wait_programs_pkey primary key (project_id, type, program_hash)
);

create function automation.event_wait_programs_record() returns trigger
    language plpgsql
    as $$
begin
    with w as (     -- an event wait, and each event branch of a `wait: {any}`
        select n -> 'wait' as x from jsonb_array_elements(coalesce(new.ir -> 'nodes', '[]'::jsonb)) n
        union all
        select b from jsonb_array_elements(coalesce(new.ir -> 'nodes', '[]'::jsonb)) n,
                      jsonb_array_elements(coalesce(n -> 'wait' -> 'branches', '[]'::jsonb)) b
    )
    insert into automation.event_wait_programs (project_id, type, program_hash, program)
    select distinct on (x ->> 'event', coalesce(md5(x -> 'correlate_event' ->> 'cel'), 'none'))
           new.project_id, x ->> 'event', coalesce(md5(x -> 'correlate_event' ->> 'cel'), 'none'),
           x -> 'correlate_event'
    from w
    where x ->> 'kind' = 'event'
    on conflict do nothing;
    return null;
end
$$;

create trigger workflow_versions_event_wait_programs
    after insert on automation.workflow_versions
    for each row execute function automation.event_wait_programs_record();

-- One row per (event, correlation program) with the value the program gave on it.
create table automation.event_correlations (
    cseq         bigint generated always as identity primary key,
    project_id   text        not null,
    type         text        not null,
    program_hash text        not null,
    value        text        not null,
    event_id     text        not null,
    received_at  timestamptz not null
);
create index event_correlations_key_idx on automation.event_correlations (project_id, type, program_hash, value, cseq);

-- What an event wait (a run_waits row of kind 'event', key = the event type) correlates on, and how far it read.
create table automation.run_event_waits (
    run_id       text        not null,
    epoch        integer     not null,
    step_id      text        not null,
    project_id   text        not null,
    type         text        not null,
    program_hash text        not null,
    value        text        not null,
    lookback_ms  bigint,                                      -- since: -15m; null: run_start or wait_open
    cursor       bigint      not null default 0,              -- the last event_correlations.cseq it examined
    before_since integer     not null default 0,              -- matching events it skipped: older than its `since`
    cel_errors   integer     not null default 0,              -- candidates whose `if` failed to evaluate
    branch       integer     not null default 0,              -- the branch of a `wait: {any}` (0 otherwise)
    constraint run_event_waits_pkey primary key (run_id, epoch, step_id, branch)
);
create index run_event_waits_key_idx on automation.run_event_waits (project_id, type, program_hash, value);

-- The lock both sides take before reading each other's rows: ingestion of an event with this correlation value
-- and the look of a wait on it.
create function automation.event_wait_lock(p_project text, p_type text, p_hash text, p_value text) returns void
    language sql
    as $$
    select pg_advisory_xact_lock(hashtextextended(
        'a44.event_wait/' || p_project || '/' || p_type || '/' || p_hash || '/' || p_value, 0));
    $$;

-- Ingestion: event p_event of project p_project gave values p_values for the programs p_hashes (of its type).
-- Per value, under its lock: record the row, then wake every run with an open wait on it (its row locked, so a
-- release in flight commits first and is woken, or commits after and sees the row in its wait_check). Returns
-- the number of runs made due.
create function automation.event_correlate(p_project text, p_type text, p_event text, p_received timestamptz,
                                           p_hashes text[], p_values text[], p_now timestamptz)
    returns integer
    language plpgsql
    as $$
declare
    i integer;
    n integer := 0;
    k integer;
begin
    for i in 1 .. coalesce(array_length(p_hashes, 1), 0) loop
        perform automation.event_wait_lock(p_project, p_type, p_hashes[i], p_values[i]);
        insert into automation.event_correlations (project_id, type, program_hash, value, event_id, received_at)
        values (p_project, p_type, p_hashes[i], p_values[i], p_event, p_received);
        perform 1 from automation.runs r
        where r.run_id in (select e.run_id from automation.run_event_waits e
                           join automation.run_waits w using (run_id, epoch, step_id)
                           where e.project_id = p_project and e.type = p_type and e.program_hash = p_hashes[i]
                             and e.value = p_values[i] and w.state = 'open')
        order by r.run_id
        for update of r;
        update automation.runs r set next_wake_at = least(r.next_wake_at, p_now)
        where r.run_id in (select e.run_id from automation.run_event_waits e
                           join automation.run_waits w using (run_id, epoch, step_id)
                           where e.project_id = p_project and e.type = p_type and e.program_hash = p_hashes[i]
                             and e.value = p_values[i] and w.state = 'open' and w.epoch = r.epoch)
          and r.state = 'waiting' and r.lease_owner is null;
        get diagnostics k = row_count;
        n := n + k;
    end loop;
    if n > 0 then
        perform pg_notify('a44_runs_due', (floor(extract(epoch from p_now) * 1000))::bigint::text);
    end if;
    return n;
end
$$;

-- The look's first half (its transaction holds the value's lock): open the wait (idempotent: the first open's
-- row, timeout instant and cursor stay) and return it with what admits a candidate: the run's watermark and
-- creation instant. `since: wait_open` starts the cursor at the last row of the value, so only later events count.
create function automation.event_wait_open(p_run text, p_epoch integer, p_step text, p_project text, p_type text,
                                           p_hash text, p_value text, p_since text, p_lookback_ms bigint,
                                           p_timeout_at timestamptz, p_now timestamptz)
    returns table (state text, output jsonb, timeout_at timestamptz, cursor bigint, event_seq bigint,
                   created_at timestamptz, lookback_ms bigint)
    language plpgsql
    as $$
begin
    insert into automation.run_waits (run_id, epoch, step_id, kind, key, opened_at, timeout_at)
    values (p_run, p_epoch, p_step, 'event', p_type, p_now, p_timeout_at)
    on conflict on constraint run_waits_pkey do nothing;
    if found then
        insert into automation.run_event_waits (run_id, epoch, step_id, project_id, type, program_hash, value,
                                                lookback_ms, cursor)
        values (p_run, p_epoch, p_step, p_project, p_type, p_hash, p_value, p_lookback_ms,
                case when p_since = 'wait_open' then
                    coalesce((select max(c.cseq) from automation.event_correlations c
                              where c.project_id = p_project and c.type = p_type and c.program_hash = p_hash
                                and c.value = p_value), 0)
                else 0 end);
    end if;
    return query select w.state, w.output, w.timeout_at, e.cursor, r.event_seq, r.created_at, e.lookback_ms
                 from automation.run_waits w
                 join automation.run_event_waits e using (run_id, epoch, step_id)
                 join automation.runs r on r.run_id = w.run_id
                 where w.run_id = p_run and w.epoch = p_epoch and w.step_id = p_step;
end
$$;

-- The look's second half: the candidates it examined moved its cursor (and its counts); the one that passed
-- `if` (p_event, its envelope p_envelope), if any, satisfies the wait unless it closed first. Returns the row.
create function automation.event_wait_settle(p_run text, p_epoch integer, p_step text, p_cursor bigint,
                                             p_before integer, p_errors integer, p_event text, p_envelope jsonb,
                                             p_now timestamptz)
    returns table (state text, output jsonb, timeout_at timestamptz)
    language plpgsql
    as $$
begin
    update automation.run_event_waits e
    set cursor = greatest(e.cursor, p_cursor), before_since = e.before_since + p_before,
        cel_errors = e.cel_errors + p_errors
    where e.run_id = p_run and e.epoch = p_epoch and e.step_id = p_step;
    if p_event is not null then
        update automation.run_waits w
        set state = 'satisfied', closed_at = p_now, satisfied_by = 'event:' || p_event,
            output = jsonb_build_object('kind', 'event', 'event', p_envelope)
        where w.run_id = p_run and w.epoch = p_epoch and w.step_id = p_step and w.state = 'open';
    end if;
    return query select w.state, w.output, w.timeout_at from automation.run_waits w
                 where w.run_id = p_run and w.epoch = p_epoch and w.step_id = p_step;
end
$$;

-- `wait: {any: [...]}`: its signal branches (names), so a signal sent while it waits wakes the run and the
-- release's check sees one buffered meanwhile. The event branches are rows of run_event_waits (by branch).
create table automation.run_wait_signals (
    run_id  text    not null,
    epoch   integer not null,
    step_id text    not null,
    branch  integer not null,
    name    text    not null,
    constraint run_wait_signals_pkey primary key (run_id, epoch, step_id, branch)
);
create index run_wait_signals_name_idx on automation.run_wait_signals (run_id, name);

-- Open (idempotent) the `any` wait of step p_step: its row (kind 'any'), its event branches (p_events: [{branch,
-- type, hash, value, since, lookback_ms}]) and its signal branches (p_signals: [{branch, name}]). Returns the row
-- with the run's watermark and creation instant, and the instant it opened (its sleep branches count from it).
create function automation.any_wait_open(p_run text, p_epoch integer, p_step text, p_project text,
                                         p_events jsonb, p_signals jsonb, p_timeout_at timestamptz,
                                         p_now timestamptz)
    returns table (state text, output jsonb, timeout_at timestamptz, opened_at timestamptz, event_seq bigint,
                   created_at timestamptz)
    language plpgsql
    as $$
begin
    insert into automation.run_waits (run_id, epoch, step_id, kind, key, opened_at, timeout_at)
    values (p_run, p_epoch, p_step, 'any', '', p_now, p_timeout_at)
    on conflict on constraint run_waits_pkey do nothing;
    if found then
        insert into automation.run_event_waits (run_id, epoch, step_id, branch, project_id, type, program_hash,
                                                value, lookback_ms, cursor)
        select p_run, p_epoch, p_step, (b ->> 'branch')::integer, p_project, b ->> 'type', b ->> 'hash',
               b ->> 'value', (b ->> 'lookback_ms')::bigint,
               case when b ->> 'since' = 'wait_open' then
                   coalesce((select max(c.cseq) from automation.event_correlations c
                             where c.project_id = p_project and c.type = b ->> 'type'
                               and c.program_hash = b ->> 'hash' and c.value = b ->> 'value'), 0)
               else 0 end
        from jsonb_array_elements(p_events) b;
        insert into automation.run_wait_signals (run_id, epoch, step_id, branch, name)
        select p_run, p_epoch, p_step, (g ->> 'branch')::integer, g ->> 'name' from jsonb_array_elements(p_signals) g;
    end if;
    return query select w.state, w.output, w.timeout_at, w.opened_at, r.event_seq, r.created_at
                 from automation.run_waits w join automation.runs r on r.run_id = w.run_id
                 where w.run_id = p_run and w.epoch = p_epoch and w.step_id = p_step;
end
$$;

-- The outcome of an `any` wait (its look chose the first to come: an event, a signal, its sleep), unless it closed
-- first; a signal outcome consumes the signal in the same transaction (the run's row is locked by the look).
create function automation.any_wait_close(p_run text, p_epoch integer, p_step text, p_satisfied_by text,
                                          p_output jsonb, p_signal bigint, p_now timestamptz)
    returns table (state text, output jsonb, timeout_at timestamptz)
    language plpgsql
    as $$
begin
    update automation.run_waits w
    set state = 'satisfied', closed_at = p_now, satisfied_by = p_satisfied_by, output = p_output
    where w.run_id = p_run and w.epoch = p_epoch and w.step_id = p_step and w.state = 'open';
    if found and p_signal is not null then
        update automation.run_signals g set consumed_epoch = p_epoch, consumed_step = p_step, consumed_at = p_now
        where g.seq = p_signal and g.consumed_at is null;
        if not found then
            raise exception 'signal % of run % was consumed twice', p_signal, p_run;
        end if;
    end if;
    return query select w.state, w.output, w.timeout_at from automation.run_waits w
                 where w.run_id = p_run and w.epoch = p_epoch and w.step_id = p_step;
end
$$;

-- A signal recorded for a run (run_signal, 0033, which holds the run's row) that an open `any` wait of the run
-- has a branch for: the run is due now (the wait's look consumes it).
create function automation.run_signals_wake_any() returns trigger
    language plpgsql
    as $$
begin
    if exists (select 1 from automation.run_wait_signals g
               join automation.run_waits w using (run_id, epoch, step_id)
               where g.run_id = new.run_id and g.name = new.name and w.state = 'open') then
        update automation.runs r set next_wake_at = least(r.next_wake_at, new.received_at)
        where r.run_id = new.run_id and r.state = 'waiting' and r.lease_owner is null;
        if found then
            perform pg_notify('a44_runs_due', (floor(extract(epoch from new.received_at) * 1000))::bigint::text);
        end if;
    end if;
    return null;
end
$$;

create trigger run_signals_wake_any
    after insert on automation.run_signals
    for each row execute function automation.run_signals_wake_any();

-- The release to `waiting` (engine_commit): due now if a wait of this epoch closed since the visit looked (a
-- signal, 0033), an open `any` wait of this epoch has a signal of one of its names buffered, or an open event
-- wait (or event branch) of this epoch has a correlated event past its cursor, received before its timeout
-- (committed between the look and this release: the ingestion or the signal found the run leased).
create or replace function automation.engine_op_wait_check(op jsonb) returns void
    language plpgsql
    as $$
declare
    x record;
begin
    select * into x from jsonb_to_record(op) as r(run_id text, epoch integer, "now" timestamptz);
    if exists (select 1 from automation.run_waits w where w.run_id = x.run_id and w.epoch = x.epoch
               and w.state <> 'open' and w.resumed_at is null)
       or exists (select 1 from automation.run_wait_signals g
                  join automation.run_waits w using (run_id, epoch, step_id)
                  join automation.run_signals s on s.run_id = g.run_id and s.name = g.name and s.consumed_at is null
                  where g.run_id = x.run_id and g.epoch = x.epoch and w.state = 'open')
       or exists (select 1 from automation.run_event_waits e
                  join automation.run_waits w using (run_id, epoch, step_id)
                  join automation.event_correlations c
                    on c.project_id = e.project_id and c.type = e.type and c.program_hash = e.program_hash
                   and c.value = e.value and c.cseq > e.cursor and c.received_at < w.timeout_at
                  where e.run_id = x.run_id and e.epoch = x.epoch and w.state = 'open') then
        update automation.runs set next_wake_at = x."now"
        where run_id = x.run_id and state = 'waiting' and lease_owner is null;
        if found then   -- engine_commit defers the trigger's notify with the release's due time: tell it now
            perform pg_notify('a44_runs_due', (floor(extract(epoch from x."now") * 1000))::bigint::text);
        end if;
    end if;
end
$$;
