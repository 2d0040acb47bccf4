-- 0037_children: child workflows (§21, docs/children.md). A `uses: workflow/NAME` step creates one run of the
-- child workflow, in the transaction that records the parent's attempt (engine_op_child_start, appended to the
-- attempt's engine_commit), and waits for it as a wait of kind `child` (run_waits, 0033): the child's end closes
-- that wait with its outcome and makes the parent due, in the transaction that ends the child
-- (run_children_deliver), so nothing polls and nothing is dropped. One child per (parent, epoch, step, kind)
-- whatever retries, re-grants and crashes: the link's unique key. A cancel of a run cascades down its tree of
-- `onParentCancel: cancel` children in the same transaction (run_cancel, replaced here). A child on the same
-- by-partition queue and key as an ancestor takes that ancestor's `seq`, so the lineage is one place in the
-- partition's line: the child is never behind a run that waits for its ancestor (no deadlock), and an unrelated
-- run of the key still waits for the whole lineage.

alter table automation.run_waits drop constraint run_waits_kind_check;
alter table automation.run_waits add constraint run_waits_kind_check check (kind in ('signal', 'event', 'any', 'approval', 'child'));

create table automation.run_children (
    child_run_id     text        primary key,
    parent_run_id    text        not null,
    parent_epoch     integer     not null,
    step_id          text        not null,
    kind             text        not null check (kind in ('action', 'compensation')),
    root_run_id      text        not null,
    depth            integer     not null check (depth >= 1),        -- 1: a child of a root run
    wait             text        not null check (wait in ('result', 'started', 'none')),
    on_parent_cancel text        not null check (on_parent_cancel in ('cancel', 'abandon')),
    created_at       timestamptz not null,
    constraint run_children_step unique (parent_run_id, parent_epoch, step_id, kind)
);
create index run_children_root_idx on automation.run_children (root_run_id);

-- The parent's attempt of step `step_id` (or its compensation) creates its child run: the link (once: a second
-- start of the same step, epoch and kind writes nothing), the pending child run of the pinned version, its
-- `run.created` event, and for `wait: result|started` the parent's open wait on it.
create function automation.engine_op_child_start(op jsonb) returns void
    language plpgsql
    as $$
declare
    x record;
    up record;
    lineage_seq bigint;
begin
    select * into x from jsonb_to_record(op) as r(run_id text, epoch integer, step_id text, kind text,
        child_run_id text, project text, workflow_id text, version integer, input jsonb, partition_key text,
        queue text, wait text, on_parent_cancel text, timeout_at timestamptz, "now" timestamptz, traceparent text);
    select c.root_run_id, c.depth into up from automation.run_children c where c.child_run_id = x.run_id;
    insert into automation.run_children (child_run_id, parent_run_id, parent_epoch, step_id, kind, root_run_id,
                                         depth, wait, on_parent_cancel, created_at)
    values (x.child_run_id, x.run_id, x.epoch, x.step_id, x.kind, coalesce(up.root_run_id, x.run_id),
            coalesce(up.depth, 0) + 1, x.wait, x.on_parent_cancel, x."now")
    on conflict on constraint run_children_step do nothing;
    if not found then
        return;     -- this step already has its child (an earlier commit of the same step): exactly one
    end if;
    if x.partition_key is not null then     -- the oldest ancestor (or the parent) on the same queue and key
        with recursive line(run_id) as (
            select x.run_id
            union all
            select c.parent_run_id from automation.run_children c join line on c.child_run_id = line.run_id
        )
        select min(r.seq) into lineage_seq from line join automation.runs r on r.run_id = line.run_id
        where r.queue = x.queue and r.partition_key = x.partition_key;
    end if;
    insert into automation.runs (run_id, project_id, workflow_id, version, state, input, idempotency_key,
                                 partition_key, queue, next_wake_at, deadline_at, created_at, updated_at, seq)
    select x.child_run_id, x.project, x.workflow_id, v.version, 'pending', coalesce(x.input, '{}'::jsonb),
           'child:' || x.run_id || ':' || x.epoch || ':' || x.step_id || (case when x.kind = 'compensation'
                                                                           then ':compensate' else '' end),
           x.partition_key, x.queue, x."now",
           x."now" + coalesce((v.ir ->> 'deadline_ms')::bigint, 259200000) * interval '1 millisecond',
           x."now", x."now", coalesce(lineage_seq, nextval('automation.runs_seq_seq'))
    from automation.workflow_versions v
    where v.project_id = x.project and v.workflow_id = x.workflow_id and v.version = x.version;
    if not found then
        raise exception 'child workflow % version % is not published in project %', x.workflow_id, x.version,
            x.project;
    end if;
    insert into automation.run_events (run_id, project_id, at, kind, state, data)
    values (x.child_run_id, x.project, x."now", 'run.created', 'pending',
            jsonb_build_object('version', x.version, 'parent_run_id', x.run_id, 'step_id', x.step_id,
                               'root_run_id', coalesce(up.root_run_id, x.run_id), 'kind', x.kind));
    if x.traceparent is not null then   -- the child's spans continue the parent's trace (trace_context_of_visit)
        insert into automation.run_trace_context (project_id, run_key, at, traceparent, tracestate)
        values (x.project, 'child:' || x.run_id || ':' || x.epoch || ':' || x.step_id
                           || (case when x.kind = 'compensation' then ':compensate' else '' end),
                x."now", x.traceparent, null);
    end if;
    if x.kind = 'action' and x.wait <> 'none' then
        insert into automation.run_waits (run_id, epoch, step_id, kind, key, opened_at, timeout_at)
        values (x.run_id, x.epoch, x.step_id, 'child', x.child_run_id, x."now", x.timeout_at)
        on conflict on constraint run_waits_pkey do nothing;
    end if;
    -- engine_commit defers the triggers' notifications to the parent's release: the child is due now
    perform pg_notify('a44_runs_due', (floor(extract(epoch from x."now") * 1000))::bigint::text);
end
$$;

-- A child's state changed: when its parent waits for it (its end for `wait: result`, its first lease for
-- `started`), close the parent's wait with the outcome (only if still open: a timeout or a cancel that closed it
-- first stays the outcome) and make the parent due, in this transaction. Locks: the child's row (held by the
-- transaction that changed it), then its parent's; every path that locks both takes them in this order.
create function automation.run_children_deliver() returns trigger
    language plpgsql
    as $$
declare
    c record;
    out jsonb;
    ended boolean := new.state in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled');
begin
    select k.parent_run_id, k.parent_epoch, k.step_id, k.wait into c from automation.run_children k
    where k.child_run_id = new.run_id and k.kind = 'action';
    if not found or c.wait = 'none' or (not ended and c.wait <> 'started') then
        return null;
    end if;
    out := jsonb_build_object('kind', 'child', 'run_id', new.run_id, 'workflow_id', new.workflow_id,
                              'version', new.version, 'state', new.state);
    if ended then
        out := out || jsonb_build_object('output', new.result, 'error_code', new.error_code,
                                         'error_message', new.error_message);
    end if;
    update automation.run_waits w
    set state = 'satisfied', closed_at = new.updated_at, satisfied_by = 'run:' || new.run_id, output = out
    where w.run_id = c.parent_run_id and w.epoch = c.parent_epoch and w.step_id = c.step_id and w.state = 'open';
    if found then
        update automation.runs r set next_wake_at = least(r.next_wake_at, new.updated_at)
        where r.run_id = c.parent_run_id and r.state = 'waiting' and r.lease_owner is null;
        if found then   -- an engine_commit defers the trigger's notify: tell the daemons now
            perform pg_notify('a44_runs_due', (floor(extract(epoch from new.updated_at) * 1000))::bigint::text);
        end if;
    end if;
    return null;
end
$$;

create trigger runs_children_deliver
    after update of state on automation.runs
    for each row
    when (old.state is distinct from new.state and (old.state = 'pending'
          or new.state in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')))
    execute function automation.run_children_deliver();

-- 0023's run_cancel, cascading: the request is recorded on the run and, in the same transaction, on each of its
-- unfinished `onParentCancel: cancel` children (recursively: their run_cancel does the same), before the run
-- itself is settled. The subtree is locked first, deepest first, so a child ending at the same moment (which
-- locks itself, then its parent) waits or goes first, never deadlocks. `abandon` children are left to run on.
create or replace function automation.run_cancel(p_run_id text, p_project text, p_by text, p_reason text,
                                                 p_compensate boolean, p_message text, p_now timestamptz)
    returns table (outcome text, state text, prev_state text)
    language plpgsql
    as $$
declare
    r automation.runs;
    settled record;
    k record;
begin
    perform 1 from (
        with recursive down(run_id, depth) as (
            select c.child_run_id, 1 from automation.run_children c
            where c.parent_run_id = p_run_id and c.kind = 'action' and c.on_parent_cancel = 'cancel'
            union all
            select c.child_run_id, down.depth + 1 from automation.run_children c join down on c.parent_run_id = down.run_id
            where c.kind = 'action' and c.on_parent_cancel = 'cancel' and down.depth < 64
        )
        select x.run_id from automation.runs x join down on down.run_id = x.run_id
        order by down.depth desc, x.run_id
        for update of x
    ) locked;
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
        for k in select c.child_run_id from automation.run_children c
                 join automation.runs y on y.run_id = c.child_run_id
                 where c.parent_run_id = r.run_id and c.kind = 'action' and c.on_parent_cancel = 'cancel'
                   and y.cancel_requested_at is null
                   and y.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')
                 order by c.created_at, c.child_run_id loop
            perform 1 from automation.run_cancel(k.child_run_id, r.project_id, p_by,
                                                 coalesce(p_reason, 'cancelled') || ' (parent ' || r.run_id || ')',
                                                 p_compensate, 'cancelled with its parent run ' || r.run_id, p_now);
        end loop;
    end if;
    select * into settled from automation.run_cancel_settle(r.run_id, p_now, true);
    return query select settled.outcome, settled.state, r.state;
end
$$;
