-- The automation schema produced by runtime/store/migrations/*.sql (generated; do not edit).
-- Regenerate: .venv/bin/python -m anthares44.automation.runtime.store.schema_dump

CREATE SCHEMA automation;

CREATE FUNCTION automation.any_wait_close(p_run text, p_epoch integer, p_step text, p_satisfied_by text, p_output jsonb, p_signal bigint, p_now timestamp with time zone) RETURNS TABLE(state text, output jsonb, timeout_at timestamp with time zone)
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.any_wait_open(p_run text, p_epoch integer, p_step text, p_project text, p_events jsonb, p_signals jsonb, p_timeout_at timestamp with time zone, p_now timestamp with time zone) RETURNS TABLE(state text, output jsonb, timeout_at timestamp with time zone, opened_at timestamp with time zone, event_seq bigint, created_at timestamp with time zone)
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.approval_decide(p_project text, p_run text, p_step text, p_person text, p_decision text, p_comment text, p_via text, p_nonce text, p_epoch integer, p_now timestamp with time zone) RETURNS TABLE(outcome text, state text, decision text, approvals integer, needed integer)
    LANGUAGE plpgsql
    AS $$
declare
    ep integer;
    q record;
    w record;
    d record;
    n integer;
    people jsonb;
begin
    select r.epoch into ep from automation.runs r where r.run_id = p_run and r.project_id = p_project for update;
    if not found then
        return query select 'unknown'::text, null::text, null::text, null::integer, null::integer;
        return;
    end if;
    if p_epoch is not null then     -- a link is for the request of its epoch (of a replayed run: closed)
        ep := p_epoch;
    end if;
    select * into q from automation.approval_requests a
    where a.run_id = p_run and a.epoch = ep and a.step_id = p_step;
    if not found then
        return query select 'no_request'::text, null::text, null::text, null::integer, null::integer;
        return;
    end if;
    select * into w from automation.run_waits v where v.run_id = p_run and v.epoch = ep and v.step_id = p_step
    for update;
    if p_nonce is not null and exists (select 1 from automation.approval_link_uses u where u.nonce = p_nonce) then
        return query select 'link_used'::text, w.state, null::text, null::integer, q.min_approvals;
        return;
    end if;
    select count(*)::integer into n from automation.approval_decisions x
    where x.run_id = p_run and x.epoch = ep and x.step_id = p_step and x.decision = 'approve';
    select * into d from automation.approval_decisions x
    where x.run_id = p_run and x.epoch = ep and x.step_id = p_step and x.person = p_person;
    if found then
        return query select 'duplicate'::text, w.state, d.decision, n, q.min_approvals;
        return;
    end if;
    if w.state = 'open' and w.timeout_at <= p_now then     -- the timeout came first: it is the outcome
        update automation.run_waits v set state = 'timed_out', closed_at = p_now
        where v.run_id = p_run and v.epoch = ep and v.step_id = p_step and v.state = 'open';
        update automation.runs r set next_wake_at = least(r.next_wake_at, p_now)
        where r.run_id = p_run and r.state = 'waiting' and r.lease_owner is null;
        w.state := 'timed_out';
    end if;
    if w.state <> 'open' then
        return query select 'closed'::text, w.state, null::text, n, q.min_approvals;
        return;
    end if;
    if not p_person = any(automation.approval_deciders(p_run, ep, p_step, p_now)) then
        return query select 'not_approver'::text, w.state, null::text, n, q.min_approvals;
        return;
    end if;
    if p_decision = 'approve' and not q.allow_self and p_person = q.initiator then
        return query select 'self'::text, w.state, null::text, n, q.min_approvals;
        return;
    end if;
    if p_nonce is not null then
        insert into automation.approval_link_uses (nonce, used_at) values (p_nonce, p_now)
        on conflict on constraint approval_link_uses_pkey do nothing;
        if not found then
            return query select 'link_used'::text, w.state, null::text, n, q.min_approvals;
            return;
        end if;
    end if;
    insert into automation.approval_decisions (run_id, epoch, step_id, person, decision, comment, via, decided_at)
    values (p_run, ep, p_step, p_person, p_decision, p_comment, p_via, p_now);
    if p_decision = 'approve' then
        n := n + 1;
    end if;
    if p_decision = 'reject' or n >= q.min_approvals then
        select coalesce(jsonb_agg(jsonb_build_object('person', x.person, 'decision', x.decision, 'at', x.decided_at,
                                                     'comment', x.comment, 'via', x.via) order by x.id), '[]')
        into people from automation.approval_decisions x
        where x.run_id = p_run and x.epoch = ep and x.step_id = p_step;
        update automation.run_waits v
        set state = 'satisfied', closed_at = p_now, satisfied_by = 'approval:' || p_person,
            output = jsonb_build_object('kind', 'approval', 'decision', p_decision, 'by', p_person,
                                        'approvers', people)
        where v.run_id = p_run and v.epoch = ep and v.step_id = p_step and v.state = 'open';
        update automation.runs r set next_wake_at = least(r.next_wake_at, p_now)
        where r.run_id = p_run and r.state = 'waiting' and r.lease_owner is null;
        return query select (case when p_decision = 'reject' then 'rejected' else 'approved' end)::text,
                            'satisfied'::text, p_decision, n, q.min_approvals;
        return;
    end if;
    return query select 'recorded'::text, w.state, p_decision, n, q.min_approvals;
end
$$;

CREATE FUNCTION automation.approval_deciders(p_run text, p_epoch integer, p_step text, p_now timestamp with time zone) RETURNS text[]
    LANGUAGE sql STABLE
    AS $$
    select coalesce(array_agg(distinct m order by m), '{}')
    from automation.approval_requests q
    join automation.approver_groups g on g.project_id = q.project_id
         and (g.name = any(q.groups) or (q.escalate_at <= p_now and g.name = any(q.escalate_groups)))
    cross join lateral unnest(g.members) m
    where q.run_id = p_run and q.epoch = p_epoch and q.step_id = p_step
$$;

CREATE FUNCTION automation.approval_decisions_frozen() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    raise exception 'approval decisions are append-only (% refused)', tg_op;
end
$$;

CREATE FUNCTION automation.approval_open(p_run text, p_epoch integer, p_step text, p_groups text[], p_escalate_groups text[], p_min integer, p_allow_self boolean, p_notify text, p_timeout_at timestamp with time zone, p_escalate_at timestamp with time zone, p_remind_at timestamp with time zone[], p_now timestamp with time zone) RETURNS TABLE(state text, output jsonb, timeout_at timestamp with time zone, opened_at timestamp with time zone)
    LANGUAGE plpgsql
    AS $$
declare
    pj text;
begin
    select r.project_id into pj from automation.runs r where r.run_id = p_run for update;
    insert into automation.run_waits (run_id, epoch, step_id, kind, key, opened_at, timeout_at)
    values (p_run, p_epoch, p_step, 'approval', 'approval:' || p_step, p_now, p_timeout_at)
    on conflict on constraint run_waits_pkey do nothing;
    if found then
        insert into automation.approval_requests (run_id, epoch, step_id, project_id, groups, escalate_groups,
                                                  min_approvals, allow_self, initiator, notify, opened_at,
                                                  timeout_at, escalate_at, remind_at, overdue_at)
        select p_run, p_epoch, p_step, pj, p_groups, p_escalate_groups, p_min, p_allow_self, i.initiator, p_notify,
               p_now, p_timeout_at, p_escalate_at, p_remind_at, coalesce(p_remind_at[1], p_escalate_at)
        from (select 1) one left join automation.run_initiators i on i.run_id = p_run;
    end if;
    return query select w.state, w.output, w.timeout_at, w.opened_at from automation.run_waits w
                 where w.run_id = p_run and w.epoch = p_epoch and w.step_id = p_step;
end
$$;

CREATE FUNCTION automation.drop_archived_attempt_month(p_name text, p_lo timestamp with time zone, p_hi timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
declare
    hot bigint;
    cold bigint;
begin
    if not exists (select 1 from pg_inherits i join pg_class c on c.oid = i.inhrelid
                   join pg_namespace n on n.oid = c.relnamespace
                   where i.inhparent = 'automation.step_attempts'::regclass and n.nspname = 'automation'
                     and c.relname = p_name and p_name <> 'step_attempts_default') then
        return null;
    end if;
    execute format('select count(*) from automation.%I', p_name) into hot;
    select coalesce(sum(rows), 0) into cold from automation.log_archive_days
    where day >= (p_lo at time zone 'UTC')::date and day < (p_hi at time zone 'UTC')::date;
    if hot <> cold then
        return null;
    end if;
    perform set_config('lock_timeout', '5s', true);
    execute format('alter table automation.step_attempts detach partition automation.%I', p_name);
    execute format('drop table automation.%I', p_name);
    return hot;
end
$$;

CREATE TABLE automation.step_attempts (
    run_id text NOT NULL,
    step_id text NOT NULL,
    attempt integer NOT NULL,
    idempotency_key text NOT NULL,
    status text NOT NULL,
    error_code text,
    started_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone,
    result jsonb,
    result_ref text,
    result_bytes integer,
    error_message text,
    epoch integer DEFAULT 0 NOT NULL,
    kind text DEFAULT 'action'::text NOT NULL,
    project_id text NOT NULL,
    worker_id text,
    lease_grant integer,
    retry_at timestamp with time zone,
    due_at timestamp with time zone,
    CONSTRAINT step_attempts_attempt_check CHECK ((attempt >= 1)),
    CONSTRAINT step_attempts_finished_check CHECK (((status = 'running'::text) = (finished_at IS NULL))),
    CONSTRAINT step_attempts_kind_check CHECK ((kind = ANY (ARRAY['action'::text, 'compensation'::text]))),
    CONSTRAINT step_attempts_result_check CHECK (((result IS NULL) OR (result_ref IS NULL))),
    CONSTRAINT step_attempts_status_check CHECK ((status = ANY (ARRAY['running'::text, 'succeeded'::text, 'failed'::text, 'timeout'::text, 'skipped'::text, 'compensated'::text, 'compensation_failed'::text, 'lease_expired'::text, 'cancelled'::text])))
)
PARTITION BY RANGE (started_at);

CREATE FUNCTION automation.engine_attempt_finished(a automation.step_attempts) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.engine_commit(p_run_id text, p_owner text, p_grant integer, p_current_step text, p_now timestamp with time zone, p_ops jsonb) RETURNS text
    LANGUAGE plpgsql
    AS $_$
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
$_$;

CREATE FUNCTION automation.engine_commit_many(p_batches jsonb, p_synchronous_commit text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
    b jsonb;
    outcomes jsonb[] := '{}';
    code text;
    msg text;
    det text;
    hnt text;
    due bigint;
begin
    if p_synchronous_commit is not null then
        perform set_config('synchronous_commit', p_synchronous_commit, true);
    end if;
    for b in select value from jsonb_array_elements(p_batches) loop
        begin
            perform automation.engine_commit(b ->> 'run_id', b ->> 'owner', (b ->> 'grant')::integer,
                                             b ->> 'current_step', (b ->> 'now')::timestamptz, b -> 'ops');
            outcomes := array_append(outcomes, null::jsonb);
            perform pg_notify('a44_run_events', b ->> 'run_id');
            if b ? 'due_ms' then
                due := least(due, (b ->> 'due_ms')::bigint);
            end if;
        exception when others then
            get stacked diagnostics code = returned_sqlstate, msg = message_text, det = pg_exception_detail,
                                    hnt = pg_exception_hint;
            outcomes := array_append(outcomes, jsonb_build_object('sqlstate', code, 'message', msg, 'detail', det,
                                                                  'hint', hnt));
        end;
    end loop;
    if due is not null then
        perform pg_notify('a44_runs_due', due::text);
    end if;
    return to_jsonb(outcomes);
end
$$;

CREATE FUNCTION automation.engine_commit_many_v2(p_batches jsonb, p_synchronous_commit text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
    b jsonb;
    outcomes jsonb[] := '{}';
    code text;
    msg text;
    det text;
    hnt text;
    due bigint;
begin
    if p_synchronous_commit is not null then
        perform set_config('synchronous_commit', p_synchronous_commit, true);
    end if;
    for b in select value from jsonb_array_elements(p_batches) loop
        begin
            perform automation.engine_commit_v2(b ->> 'run_id', b ->> 'owner', (b ->> 'grant')::integer,
                                                b ->> 'current_step', (b ->> 'now')::timestamptz, b -> 'ops');
            outcomes := array_append(outcomes, null::jsonb);
            perform pg_notify('a44_run_events', b ->> 'run_id');
            if b ? 'due_ms' then
                due := least(due, (b ->> 'due_ms')::bigint);
            end if;
        exception when others then
            get stacked diagnostics code = returned_sqlstate, msg = message_text, det = pg_exception_detail,
                                    hnt = pg_exception_hint;
            outcomes := array_append(outcomes, jsonb_build_object('sqlstate', code, 'message', msg, 'detail', det,
                                                                  'hint', hnt));
        end;
    end loop;
    if due is not null then
        perform pg_notify('a44_runs_due', due::text);
    end if;
    return to_jsonb(outcomes);
end
$$;

CREATE FUNCTION automation.engine_commit_v2(p_run_id text, p_owner text, p_grant integer, p_current_step text, p_now timestamp with time zone, p_ops jsonb) RETURNS text
    LANGUAGE plpgsql
    AS $$
declare
    asked timestamptz;
begin
    if p_ops @> '[{"op": "run_transition", "to": "succeeded", "finished": true}]'
       or p_ops @> '[{"op": "run_transition", "to": "partial", "finished": true}]' then
        select cancel_requested_at into asked from automation.runs
        where run_id = p_run_id and lease_owner = p_owner and lease_grants = p_grant
        for update;
        if asked is not null then
            raise exception using errcode = 'A44CQ',
                message = format('run %s has a cancel request (since %s): it ends cancelled', p_run_id, asked);
        end if;
    end if;
    return automation.engine_commit(p_run_id, p_owner, p_grant, p_current_step, p_now, p_ops);
end
$$;

CREATE FUNCTION automation.engine_op_attempt_finish(op jsonb) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.engine_op_attempt_record(op jsonb) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.engine_op_attempt_records(op jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
begin
    perform set_config('a44.attempt_sums', 'op', true);
    with x as (
        select * from rows from (jsonb_to_recordset(op -> 'rows')
                as (run_id text, step_id text, attempt integer, key text, started_at timestamptz, epoch integer,
                    kind text, project text, worker_id text, lease_grant integer, status text, error_code text,
                    error_message text, result text, result_bytes integer, retry_at timestamptz,
                    result_ref text, finished_at timestamptz)) with ordinality
            as r(run_id, step_id, attempt, key, started_at, epoch, kind, project, worker_id, lease_grant, status,
                 error_code, error_message, result, result_bytes, retry_at, result_ref, finished_at, n)
    ), a as (
        insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, error_code,
                                              error_message, result, started_at, finished_at, epoch, kind,
                                              project_id, worker_id, lease_grant, result_bytes, retry_at, result_ref)
        select run_id, step_id, attempt, key, status, error_code, error_message, result::jsonb, started_at,
               finished_at, epoch, kind, project, worker_id, lease_grant, result_bytes, retry_at, result_ref
        from x order by n
    ), e as (
        insert into automation.run_events (run_id, project_id, at, kind, step_id, attempt, status, error_code,
                                           message, data)
        select run_id, project, finished_at, 'attempt.finished', step_id, attempt, status, error_code, error_message,
               jsonb_build_object('epoch', epoch, 'kind', kind, 'retry_at', retry_at,
                                  'duration_ms', round(extract(epoch from finished_at - started_at) * 1000))
        from x order by n
    )
    insert into automation.metric_attempt_sums (project_id, run_id, step_id, kind, status, bucket, attempts,
                                                retries, seconds)
    select s.project, s.run_id, s.step, s.kind, s.status, automation.metric_bucket(s.d), count(*),
           count(*) filter (where s.attempt > 1), sum(s.d)
    from (select project, run_id, split_part(step_id, '[', 1) as step, kind, status, attempt,
                 greatest(extract(epoch from finished_at - started_at), 0)::float8 as d
          from x where status <> 'running') s
    group by 1, 2, 3, 4, 5, 6;
    perform set_config('a44.attempt_sums', '', true);
end
$$;

CREATE FUNCTION automation.engine_op_attempt_start(op jsonb) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.engine_op_child_start(op jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
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
    perform pg_notify('a44_runs_due', (floor(extract(epoch from x."now") * 1000))::bigint::text);
end
$$;

CREATE FUNCTION automation.engine_op_partition_conflict(op jsonb) RETURNS void
    LANGUAGE sql
    AS $$
    update automation.run_partitions p
    set skipped_by = x.holder, skip_reason = x.reason, updated_at = x."now"
    from jsonb_to_record(op) as x(run_id text, step_id text, partition text, holder text, reason text,
                                  "now" timestamptz)
    where p.run_id = x.run_id and p.step_id = x.step_id and p.partition = x.partition
$$;

CREATE FUNCTION automation.engine_op_partition_epoch(op jsonb) RETURNS void
    LANGUAGE sql
    AS $$
    update automation.run_partitions p set epoch = x.epoch, updated_at = x."now"
    from jsonb_to_record(op) as x(run_id text, step_id text, epoch integer, "now" timestamptz)
    where p.run_id = x.run_id and p.step_id = x.step_id and p.epoch < x.epoch and p.state in ('success', 'skipped')
$$;

CREATE FUNCTION automation.engine_op_partition_items(op jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
declare
    x record;
begin
    select * into x from jsonb_to_record(op) as r(run_id text, project text, workflow text, step_id text,
                                                  epoch integer, items jsonb, "now" timestamptz);
    insert into automation.partition_items (run_id, step_id, ordinal, partition, item)
    select x.run_id, x.step_id, (e.n - 1)::integer, e.pair ->> 0, nullif(e.pair -> 1, 'null'::jsonb)
    from jsonb_array_elements(x.items) with ordinality as e(pair, n)
    on conflict do nothing;
    insert into automation.run_partitions (run_id, project_id, workflow_id, step_id, partition, ordinal, epoch,
                                           state, attempts, updated_at)
    select x.run_id, x.project, x.workflow, x.step_id, e.pair ->> 0, (e.n - 1)::integer, x.epoch, 'pending', 0,
           x."now"
    from jsonb_array_elements(x.items) with ordinality as e(pair, n)
    on conflict (run_id, step_id, partition) do nothing;
    update automation.partition_plans set item_count = jsonb_array_length(x.items)
    where run_id = x.run_id and step_id = x.step_id and keys is null;
end
$$;

CREATE FUNCTION automation.engine_op_partition_plan(op jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
declare
    x record;
    taken text;
begin
    select * into x from jsonb_to_record(op) as r(run_id text, project text, workflow text, step_id text,
                                                  source text, keys jsonb, epoch integer, exclusive boolean,
                                                  "now" timestamptz);
    if x.exclusive then
        perform pg_advisory_xact_lock(hashtextextended('a44.partition_plan/' || x.project || '/' || x.workflow
                                                       || '/' || x.step_id, 0));
        select p.partition into taken
        from automation.run_partitions p
        join automation.runs r on r.run_id = p.run_id
        where p.project_id = x.project and p.workflow_id = x.workflow and p.step_id = x.step_id
          and p.run_id <> x.run_id
          and p.partition in (select jsonb_array_elements_text(x.keys))
          and ((p.state = 'success' or (p.state = 'skipped' and coalesce(p.skipped_by, '') not like 'run:%'))
               or r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled'))
        limit 1;
        if taken is not null then
            raise exception using errcode = 'A44PC',
                message = format('partition %s of step %s is taken by another run', taken, x.step_id);
        end if;
    end if;
    insert into automation.partition_plans (run_id, step_id, project_id, workflow_id, source, keys, epoch,
                                            planned_at)
    values (x.run_id, x.step_id, x.project, x.workflow, x.source, x.keys, x.epoch, x."now")
    on conflict (run_id, step_id) do nothing;
end
$$;

CREATE FUNCTION automation.engine_op_partition_state(op jsonb) RETURNS void
    LANGUAGE sql
    AS $$
    insert into automation.run_partitions as p (run_id, project_id, workflow_id, step_id, partition, ordinal, epoch,
                                                state, attempts, error_code, error_message, rows, worker_id,
                                                started_at, finished_at, updated_at)
    select run_id, project, workflow, step_id, partition, ordinal, epoch, state, attempts, error_code, error_message,
           rows::jsonb, worker_id, started_at, finished_at, "now"
    from jsonb_to_record(op) as x(run_id text, project text, workflow text, step_id text, partition text,
                                  ordinal integer, epoch integer, state text, attempts integer, error_code text,
                                  error_message text, rows text, worker_id text, started_at timestamptz,
                                  finished_at timestamptz, "now" timestamptz)
    on conflict (run_id, step_id, partition) do update
        set ordinal = excluded.ordinal, epoch = excluded.epoch, state = excluded.state, attempts = excluded.attempts,
            error_code = excluded.error_code, error_message = excluded.error_message, rows = excluded.rows,
            worker_id = coalesce(excluded.worker_id, p.worker_id), started_at = excluded.started_at,
            finished_at = excluded.finished_at, updated_at = excluded.updated_at
$$;

CREATE FUNCTION automation.engine_op_partition_states(op jsonb) RETURNS void
    LANGUAGE sql
    AS $$
    insert into automation.run_partitions as p (run_id, project_id, workflow_id, step_id, partition, ordinal, epoch,
                                                state, attempts, error_code, error_message, rows, worker_id,
                                                started_at, finished_at, updated_at)
    select run_id, project, workflow, step_id, partition, ordinal, epoch, state, attempts, error_code, error_message,
           rows::jsonb, worker_id, started_at, finished_at, "now"
    from rows from (jsonb_to_recordset(op -> 'rows')
             as (run_id text, project text, workflow text, step_id text, partition text, ordinal integer,
                 epoch integer, state text, attempts integer, error_code text, error_message text, rows text,
                 worker_id text, started_at timestamptz, finished_at timestamptz, "now" timestamptz))
         with ordinality as x(run_id, project, workflow, step_id, partition, ordinal, epoch, state, attempts,
                              error_code, error_message, rows, worker_id, started_at, finished_at, "now", n)
    order by n
    on conflict (run_id, step_id, partition) do update
        set ordinal = excluded.ordinal, epoch = excluded.epoch, state = excluded.state, attempts = excluded.attempts,
            error_code = excluded.error_code, error_message = excluded.error_message, rows = excluded.rows,
            worker_id = coalesce(excluded.worker_id, p.worker_id), started_at = excluded.started_at,
            finished_at = excluded.finished_at, updated_at = excluded.updated_at
$$;

CREATE FUNCTION automation.engine_op_partition_wait_check(op jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
declare
    x record;
    w record;
    h text;
    free boolean := false;
begin
    select * into x from jsonb_to_record(op) as r(run_id text, "now" timestamptz);
    for w in select * from automation.partition_lock_waiters v where v.run_id = x.run_id loop
        select l.run_id into h from automation.partition_locks l
        where l.project_id = w.project_id and l.workflow_id = w.workflow_id and l.step_id = w.step_id
          and l.partition = w.partition
        for share;
        if not found or h = x.run_id or not exists (
                select 1 from automation.runs r where r.run_id = h
                  and r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')) then
            free := true;
            exit;
        end if;
    end loop;
    if free then
        update automation.runs set next_wake_at = x."now"
        where run_id = x.run_id and state = 'waiting' and lease_owner is null;
    end if;
end
$$;

CREATE FUNCTION automation.engine_op_partition_wait_check_v2(op jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
declare
    x record;
    w record;
    h text;
    free boolean := false;
begin
    select * into x from jsonb_to_record(op) as r(run_id text, "now" timestamptz);
    for w in select * from automation.partition_lock_waiters v where v.run_id = x.run_id loop
        select l.run_id into h from automation.partition_locks l
        where l.project_id = w.project_id and l.workflow_id = w.workflow_id and l.step_id = w.step_id
          and l.partition = w.partition
        for share skip locked;
        if not found or h = x.run_id or not exists (
                select 1 from automation.runs r where r.run_id = h
                  and r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')) then
            free := true;
            exit;
        end if;
    end loop;
    if free then
        update automation.runs set next_wake_at = x."now"
        where run_id = x.run_id and state = 'waiting' and lease_owner is null;
    end if;
end
$$;

CREATE FUNCTION automation.engine_op_queue_run_failed(op jsonb) RETURNS text
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.engine_op_run_event(op jsonb) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.engine_op_run_transition(op jsonb) RETURNS text
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.engine_op_sleep_fire(op jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.engine_op_sleep_open(op jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.engine_op_step_rows_record(op jsonb) RETURNS void
    LANGUAGE sql
    AS $$
    insert into automation.step_rows (run_id, step_id, partition, epoch, rows_in, rows_out, rows_error, recorded_at)
    select run_id, step_id, partition, epoch, rows_in, rows_out, rows_error, "now"
    from jsonb_to_record(op) as x(run_id text, step_id text, partition text, epoch integer, rows_in bigint,
                                  rows_out bigint, rows_error bigint, "now" timestamptz)
    on conflict (run_id, step_id, partition) do update
    set epoch = excluded.epoch, rows_in = excluded.rows_in, rows_out = excluded.rows_out,
        rows_error = excluded.rows_error, recorded_at = excluded.recorded_at
$$;

CREATE FUNCTION automation.engine_op_timer_check(op jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
begin
    update automation.runs r
    set next_wake_at = least(r.next_wake_at, t.due)
    from (select min(s.due_at) as due
          from automation.step_attempts s join automation.runs q on q.run_id = s.run_id and q.epoch = s.epoch
          where s.run_id = op ->> 'run_id' and s.status = 'running' and s.due_at is not null) t
    where r.run_id = op ->> 'run_id' and t.due is not null and r.lease_owner is null;
end
$$;

CREATE FUNCTION automation.engine_op_wait_check(op jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.engine_op_wait_resumed(op jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
declare
    x record;
begin
    select * into x from jsonb_to_record(op) as r(run_id text, epoch integer, step_id text, "now" timestamptz);
    update automation.run_waits w set resumed_at = x."now"
    where w.run_id = x.run_id and w.epoch = x.epoch and w.step_id = x.step_id and w.resumed_at is null;
end
$$;

CREATE FUNCTION automation.ensure_step_attempt_partitions(p_at timestamp with time zone, p_months_ahead integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
declare
    first_month timestamp := date_trunc('month', p_at at time zone 'UTC');
    lo timestamptz;
    hi timestamptz;
    part text;
    created integer := 0;
begin
    perform pg_advisory_xact_lock(hashtext('a44.automation.step_attempts.partitions'));
    for i in 0 .. p_months_ahead loop
        lo := (first_month + make_interval(months => i)) at time zone 'UTC';
        hi := (first_month + make_interval(months => i + 1)) at time zone 'UTC';
        part := 'step_attempts_y' || to_char(lo at time zone 'UTC', 'YYYY') || 'm' || to_char(lo at time zone 'UTC', 'MM');
        if to_regclass('automation.' || part) is null then
            execute format('create table automation.%I (like automation.step_attempts including defaults including constraints)', part);
            execute format('with moved as (delete from automation.step_attempts_default where started_at >= %L and started_at < %L returning *) '
                           'insert into automation.%I select * from moved', lo, hi, part);
            execute format('alter table automation.step_attempts attach partition automation.%I for values from (%L) to (%L)',
                           part, lo, hi);
            created := created + 1;
        end if;
    end loop;
    return created;
end
$$;

CREATE FUNCTION automation.event_correlate(p_project text, p_type text, p_event text, p_received timestamp with time zone, p_hashes text[], p_values text[], p_now timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.event_wait_lock(p_project text, p_type text, p_hash text, p_value text) RETURNS void
    LANGUAGE sql
    AS $$
    select pg_advisory_xact_lock(hashtextextended(
        'a44.event_wait/' || p_project || '/' || p_type || '/' || p_hash || '/' || p_value, 0));
    $$;

CREATE FUNCTION automation.event_wait_open(p_run text, p_epoch integer, p_step text, p_project text, p_type text, p_hash text, p_value text, p_since text, p_lookback_ms bigint, p_timeout_at timestamp with time zone, p_now timestamp with time zone) RETURNS TABLE(state text, output jsonb, timeout_at timestamp with time zone, cursor bigint, event_seq bigint, created_at timestamp with time zone, lookback_ms bigint)
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.event_wait_programs_record() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.event_wait_settle(p_run text, p_epoch integer, p_step text, p_cursor bigint, p_before integer, p_errors integer, p_event text, p_envelope jsonb, p_now timestamp with time zone) RETURNS TABLE(state text, output jsonb, timeout_at timestamp with time zone)
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.events_watermark() RETURNS bigint
    LANGUAGE sql STABLE
    AS $$ select coalesce(max(seq), 0) from automation.events $$;

CREATE FUNCTION automation.flow_count_keys() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    if tg_op = 'INSERT' then
        insert into automation.flow_limit_keys as l (project_id, limit_id, live_keys)
        values (new.project_id, new.limit_id, 1)
        on conflict (project_id, limit_id) do update set live_keys = l.live_keys + 1;
    else
        update automation.flow_limit_keys set live_keys = live_keys - 1
        where project_id = old.project_id and limit_id = old.limit_id;
    end if;
    return null;
end
$$;

CREATE FUNCTION automation.flow_dead_letter(p_run text, p_now timestamp with time zone, p_code text, p_message text) RETURNS text
    LANGUAGE plpgsql
    AS $$
declare
    c automation.runs;
    id text := 'dlq_' || replace(gen_random_uuid()::text, '-', '');
begin
    update automation.runs r
    set state = 'cancelled', next_wake_at = null, error_code = p_code, error_message = p_message,
        finished_at = p_now, updated_at = p_now, flow_keyed = true
    where r.run_id = p_run and r.state = 'pending' and r.lease_owner is null
    returning r.* into c;
    if c.run_id is null then
        return null;
    end if;
    insert into automation.run_events (run_id, project_id, at, kind, state, error_code, message, data)
    values (c.run_id, c.project_id, p_now, 'run.state', 'cancelled', p_code, p_message,
            jsonb_build_object('from', 'pending', 'reason', 'flow_key'));
    insert into automation.dead_letters (dead_letter_id, project_id, queue, trigger_id, workflow_id, event_id,
                                         envelope, envelope_bytes, error_code, error_message, attempts, created_at,
                                         run_id, version, partition_key, input, history, redrive_of)
    select id, c.project_id, coalesce(c.queue, 'q_default'), c.trigger_id, c.workflow_id, c.event_id,
           coalesce((select d.envelope from automation.dead_letters d where d.dead_letter_id = c.dead_letter_id),
                    (select e.envelope from automation.events e where e.event_id = c.event_id),
                    jsonb_build_object('id', coalesce(c.origin_run_id, c.run_id), 'type', 'run',
                                       'idempotency_key', c.idempotency_key, 'partition_key', c.partition_key,
                                       'occurred_at', c.created_at, 'attempt', 1, 'data', c.input,
                                       'trigger_id', c.trigger_id, 'workflow_id', c.workflow_id)::text),
           (select d.envelope_bytes from automation.dead_letters d where d.dead_letter_id = c.dead_letter_id),
           p_code, p_message, c.delivery - 1, p_now, c.run_id, c.version, c.partition_key, c.input,
           coalesce((select d.history from automation.dead_letters d where d.dead_letter_id = c.dead_letter_id),
                    '[]'::jsonb),
           c.dead_letter_id;
    return id;
end
$$;

CREATE FUNCTION automation.flow_key_run(p_now timestamp with time zone, p_doc jsonb, p_max_keys bigint) RETURNS text
    LANGUAGE plpgsql
    AS $$
declare
    r automation.runs;
    k jsonb;
    fk automation.flow_keys;
    live bigint;
begin
    select * into r from automation.runs x where x.run_id = p_doc ->> 'run_id' for update;
    if r.run_id is null or r.flow_keyed is not false or r.state <> 'pending' then
        return 'gone';
    end if;
    if p_doc ->> 'invalid' is not null then
        perform automation.flow_dead_letter(r.run_id, p_now, 'E_FLOW_KEY_INVALID', p_doc ->> 'invalid');
        return 'invalid';
    end if;
    for k in select * from jsonb_array_elements(p_doc -> 'keys') loop
        select * into fk from automation.flow_keys f where f.project_id = r.project_id and f.key = k ->> 'key'
        for update;
        if fk.key is null then
            select l.live_keys into live from automation.flow_limit_keys l
            where l.project_id = r.project_id and l.limit_id = k ->> 'limit_id';
            if coalesce(live, 0) >= p_max_keys then
                perform automation.flow_dead_letter(r.run_id, p_now, 'E_FLOW_KEYS_EXHAUSTED',
                    'flow limit ' || (k ->> 'limit_id') || ' already has ' || live || ' live keys; new key '
                    || (k ->> 'key') || ' refused');
                return 'exhausted';
            end if;
            insert into automation.flow_keys (project_id, key, limit_id, value, kind, max_n, per_ms, burst, tokens,
                                              refilled_at, created_at, used_at)
            values (r.project_id, k ->> 'key', k ->> 'limit_id', k ->> 'value', k ->> 'kind', (k ->> 'max_n')::integer,
                    (k ->> 'per_ms')::bigint, (k ->> 'burst')::integer,
                    case k ->> 'kind' when 'throttle' then (k ->> 'burst')::double precision
                                      when 'rate' then 0 end,
                    case when k ->> 'kind' in ('throttle', 'rate') then p_now end, p_now, p_now)
            returning * into fk;
        else
            update automation.flow_keys f
            set max_n = (k ->> 'max_n')::integer, per_ms = (k ->> 'per_ms')::bigint, burst = (k ->> 'burst')::integer,
                used_at = p_now
            where f.project_id = fk.project_id and f.key = fk.key;
        end if;
        if fk.kind = 'rate' then
            if fk.refilled_at + make_interval(secs => fk.per_ms / 1000.0) <= p_now then
                fk.tokens := 0;
                fk.refilled_at := p_now;
            end if;
            if fk.tokens >= (k ->> 'max_n')::integer then
                update automation.runs x
                set state = 'cancelled', next_wake_at = null, error_code = 'E_FLOW_RATE_LIMITED',
                    error_message = 'skipped: rateLimit ' || fk.key || ' allows ' || (k ->> 'max_n') || ' per '
                                    || (fk.per_ms / 1000) || ' s; the window from '
                                    || to_char(fk.refilled_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
                                    || ' is used up',
                    finished_at = p_now, updated_at = p_now, flow_keyed = true
                where x.run_id = r.run_id;
                insert into automation.run_events (run_id, project_id, at, kind, state, error_code, message, data)
                select r.run_id, r.project_id, p_now, 'run.state', 'cancelled', 'E_FLOW_RATE_LIMITED', x.error_message,
                       jsonb_build_object('from', 'pending', 'reason', 'skipped', 'rate_key', fk.key)
                from automation.runs x where x.run_id = r.run_id;
                update automation.flow_keys f set tokens = fk.tokens, refilled_at = fk.refilled_at
                where f.project_id = fk.project_id and f.key = fk.key;
                update automation.flow_limit_keys l set skipped = l.skipped + 1
                where l.project_id = fk.project_id and l.limit_id = fk.limit_id;
                return 'skipped';
            end if;
            update automation.flow_keys f set tokens = fk.tokens + 1, refilled_at = fk.refilled_at
            where f.project_id = fk.project_id and f.key = fk.key;
        end if;
    end loop;
    update automation.runs x
    set flow_keyed = true,
        flow_keys = c.keys, flow_caps = c.caps, flow_hold = c.hold, flow_weights = c.weights,
        flow_holds = coalesce(c.any_hold, false),
        flow_throttle = (select e ->> 'key' from jsonb_array_elements(p_doc -> 'keys') e where e ->> 'kind' = 'throttle'
                         limit 1),
        flow_priority = (p_doc ->> 'priority')::smallint
    from (select array_agg(e ->> 'key' order by o) as keys,
                 array_agg(coalesce((e ->> 'max_n')::integer, 2147483647) order by o) as caps,
                 array_agg(coalesce((e ->> 'hold')::boolean, false) order by o) as hold,
                 array_agg(coalesce((e ->> 'weight')::double precision, (e ->> 'max_n')::double precision) order by o)
                     as weights,
                 bool_or((e ->> 'hold')::boolean) as any_hold
          from jsonb_array_elements(p_doc -> 'keys') with ordinality t(e, o)
          where e ->> 'kind' in ('concurrency', 'fairness')) c
    where x.run_id = r.run_id;
    return 'keyed';
end
$$;

CREATE FUNCTION automation.flow_keys_sweep(p_now timestamp with time zone, p_idle interval, p_limit integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
declare
    n integer;
begin
    delete from automation.flow_keys k
    where (k.project_id, k.key) in (
        select f.project_id, f.key from automation.flow_keys f
        where f.used_at < p_now - greatest(p_idle, coalesce(make_interval(secs => f.per_ms / 1000.0), p_idle))
          and not exists (select 1 from automation.runs r
                          where r.project_id = f.project_id and r.state not in ('succeeded', 'partial', 'failed',
                                                                                'compensation_failed', 'cancelled')
                            and r.flow_keys @> array[f.key])
          and not exists (select 1 from automation.runs r
                          where r.project_id = f.project_id and r.flow_throttle = f.key
                            and r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled'))
        order by f.used_at
        limit p_limit);
    get diagnostics n = row_count;
    return n;
end
$$;

CREATE FUNCTION automation.flow_mark_unkeyed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    if exists (select 1 from automation.workflow_versions v
               where v.project_id = new.project_id and v.workflow_id = new.workflow_id and v.version = new.version
                 and v.has_flow) then
        new.flow_keyed := false;
        new.flow_keys := null; new.flow_caps := null; new.flow_hold := null; new.flow_holds := false;
        new.flow_throttle := null; new.flow_parked_at := null; new.flow_weights := null; new.flow_priority := null;
    end if;
    return new;
end
$$;

CREATE FUNCTION automation.flow_promote_parked() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
    n integer;
begin
    if (old.lease_owner is not null and new.lease_owner is null)
       or (new.flow_holds and new.state in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')
           and old.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')) then
        perform pg_advisory_xact_lock(hashtext('a44.automation.lease_claim'));
        update automation.runs p
        set next_wake_at = new.updated_at, flow_parked_at = null
        from (select h.run_id       -- the head of each set of keys parked behind one of these (FIFO in it)
              from (select distinct on (y.flow_keys) y.run_id, y.flow_parked_at, y.seq,
                           greatest(1, coalesce(y.flow_priority, 5)
                                       - floor(extract(epoch from (new.updated_at - y.created_at)) / 30)) as eprio
                    from automation.runs y
                    where y.flow_parked_at is not null and y.flow_keys && new.flow_keys
                      and y.project_id = new.project_id and y.run_id <> new.run_id
                    order by y.flow_keys, coalesce(y.flow_priority, 5), y.flow_parked_at, y.seq) h
              order by h.eprio, h.flow_parked_at, h.seq
              limit 32) x
        cross join lateral (select z.run_id from automation.runs z      -- never wait on a row while holding the
                            where z.run_id = x.run_id and z.flow_parked_at is not null     -- claim lock
                            for update skip locked) l
        where p.run_id = l.run_id;
        get diagnostics n = row_count;
        if n > 0 then
            perform pg_notify('a44_runs_due', (floor(extract(epoch from new.updated_at) * 1000))::bigint::text);
        end if;
    end if;
    return null;
end
$$;

CREATE FUNCTION automation.iso_instant(t timestamp with time zone) RETURNS text
    LANGUAGE sql STABLE
    AS $$
select to_char(t at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
       || case when extract(microseconds from t)::bigint % 1000000 = 0 then ''
               else to_char(t at time zone 'UTC', '.US') end
       || '+00:00'
$$;

CREATE FUNCTION automation.lease_claim(p_worker_id text, p_now timestamp with time zone, p_limit integer, p_lease interval, p_park_until timestamp with time zone) RETURNS TABLE(run_id text, project_id text, workflow_id text, version integer, state text, input jsonb, idempotency_key text, trigger_id text, event_id text, partition_key text, queue text, epoch integer, current_step text, failed_step text, error_code text, error_message text, lease_grants integer, lease_reclaims integer, deadline_at timestamp with time zone, created_at timestamp with time zone, delivery integer, prev_state text, prev_owner text)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
declare
    sorting text;
    caching text;
begin
    perform set_config('a44.notify', 'deferred', true);    -- before the grants fire the triggers
    perform pg_advisory_xact_lock(hashtext('a44.automation.lease_claim'));
    sorting := current_setting('enable_sort');
    caching := current_setting('plan_cache_mode');
    perform set_config('enable_sort', 'off', true);
    perform set_config('plan_cache_mode', 'force_generic_plan', true);
    return query
    with held as (      -- slots in use: runs whose lease is held (O(runs in flight), runs_leased_idx)
        select project_id, coalesce(queue, 'q_default') as queue, workflow_id, count(*)::integer as n
        from automation.runs
        where lease_owner is not null
        group by 1, 2, 3
    ), qfull as (
        select h.project_id, h.queue, sum(h.n)::integer as n, max(coalesce(q.max_concurrency, 100)) as cap
        from held h
        left join automation.queues q on q.project_id = h.project_id and q.queue_id = h.queue
        group by 1, 2
    ), wheld as (
        select project_id, workflow_id, sum(n)::integer as n from held group by 1, 2
    ), fheld as (       -- holders of each concurrency key, counted now (never a stored counter)
        select x.project_id, x.key, count(*)::integer as n
        from (select r.project_id, u.key
              from automation.runs r cross join lateral unnest(r.flow_keys) u(key)
              where r.lease_owner is not null and r.flow_keys is not null
              union all
              select r.project_id, u.key
              from automation.runs r cross join lateral unnest(r.flow_keys, r.flow_hold) u(key, hold)
              where r.flow_holds and r.lease_owner is null and u.hold
                and r.state in ('running', 'waiting', 'sleeping', 'awaiting_confirmation', 'compensating')) x
        group by 1, 2
    ), cand as (
        select r.run_id, r.project_id, coalesce(r.queue, 'q_default') as queue, r.workflow_id, r.version,
               r.next_wake_at, r.lease_owner is not null as reclaim, r.state as rstate, r.flow_keys, r.flow_caps,
               r.flow_hold, r.flow_throttle, r.flow_weights,
               greatest(1, coalesce(r.flow_priority, 5)
                           - floor(extract(epoch from (p_now - r.created_at)) / 30))::integer as eprio,
               (r.state = 'pending' and r.lease_owner is null and r.partition_key is not null
                and exists (select 1 from automation.queues oq
                            where oq.project_id = r.project_id and oq.queue_id = r.queue and oq.ordering = 'by-partition')
                and exists (select 1 from automation.runs p
                            where p.project_id = r.project_id and p.queue = r.queue and p.partition_key = r.partition_key
                              and p.seq < r.seq
                              and p.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled'))) as blocked
        from automation.runs r
        where r.next_wake_at <= p_now
          and r.state in ('pending', 'running', 'waiting', 'sleeping', 'compensating')
          and r.flow_keyed is not false
          and (r.lease_owner is not null or (
               not exists (select 1 from qfull f
                           where f.project_id = r.project_id and f.queue = coalesce(r.queue, 'q_default') and f.n >= f.cap)
               and not exists (select 1 from wheld w
                               join automation.workflow_versions v
                                 on v.project_id = w.project_id and v.workflow_id = w.workflow_id and v.version = r.version
                               where w.project_id = r.project_id and w.workflow_id = r.workflow_id
                                 and w.n >= v.max_concurrency)))
        order by r.next_wake_at
        limit p_limit * 4
    ), tok as (         -- the throttle buckets of the candidates, refilled to p_now
        select k.project_id, k.key, k.max_n, k.per_ms,
               least(k.burst::double precision,
                     k.tokens + extract(epoch from (p_now - k.refilled_at)) * 1000.0 * k.max_n / k.per_ms) as avail
        from automation.flow_keys k
        where (k.project_id, k.key) in (select c.project_id, c.flow_throttle from cand c
                                        where c.flow_throttle is not null and not c.reclaim)
    ), share as (       -- per candidate and key: the key's use once this run and those before it of the key got in
        select c.run_id, c.project_id, c.next_wake_at, c.eprio, c.rstate, u.key, u.cap, u.hold,
               coalesce((select h.n from fheld h where h.project_id = c.project_id and h.key = u.key), 0) as held,
               (coalesce((select h.n from fheld h where h.project_id = c.project_id and h.key = u.key), 0)
                + row_number() over (partition by c.project_id, u.key order by c.eprio, c.next_wake_at, c.run_id))
               ::double precision / u.weight as term
        from cand c cross join lateral unnest(c.flow_keys, c.flow_caps, c.flow_hold, c.flow_weights)
                                       u(key, cap, hold, weight)
        where not c.reclaim and not c.blocked and c.flow_keys is not null
    ), tot as (
        select run_id, sum(term) as s from share group by run_id
    ), need as (        -- each candidate's keys it does not hold yet, ranked per key (fair share first); room per key
        select n.run_id, n.key, n.kind,
               row_number() over (partition by n.project_id, n.key order by n.eprio, n.score, n.next_wake_at, n.run_id)
                   as ki,
               n.room
        from (select s.run_id, s.project_id, s.next_wake_at, s.eprio, s.key, 'c' as kind, s.cap - s.held as room,
                     t.s - s.term as score       -- the use of its other keys: the least used tenant goes first
              from share s join tot t on t.run_id = s.run_id
              where not (s.hold and s.rstate <> 'pending')
              union all
              select c.run_id, c.project_id, c.next_wake_at, c.eprio, c.flow_throttle, 't',
                     floor(coalesce(t.avail, 1))::integer, 0
              from cand c left join tok t on t.project_id = c.project_id and t.key = c.flow_throttle
              where not c.reclaim and not c.blocked and c.flow_throttle is not null) n
    ), over as (
        select run_id, bool_or(kind = 'c') as by_key from need where ki > room group by run_id
    ), ranked as (
        select c.run_id, c.next_wake_at, c.reclaim, c.eprio,
               row_number() over (partition by c.project_id, c.queue order by c.eprio, c.next_wake_at, c.run_id) as qi,
               row_number() over (partition by c.project_id, c.workflow_id order by c.eprio, c.next_wake_at, c.run_id)
                   as wi,
               coalesce(q.max_concurrency, 100) - coalesce(f.n, 0) as qroom,
               v.max_concurrency - coalesce(w.n, 0) as wroom
        from cand c
        join automation.workflow_versions v
          on v.project_id = c.project_id and v.workflow_id = c.workflow_id and v.version = c.version
        left join automation.queues q on q.project_id = c.project_id and q.queue_id = c.queue
        left join qfull f on f.project_id = c.project_id and f.queue = c.queue
        left join wheld w on w.project_id = c.project_id and w.workflow_id = c.workflow_id
        where not c.blocked and not c.reclaim and not exists (select 1 from over o where o.run_id = c.run_id)
    ), pick as (
        select run_id, 0 as eprio, next_wake_at from cand where reclaim
        union all
        select run_id, eprio, next_wake_at from ranked where qi <= qroom and wi <= wroom
    ), due as (
        select x.run_id, x.prev_state, x.prev_owner
        from (select run_id from pick order by eprio, next_wake_at limit p_limit) p
        cross join lateral (select r.run_id, r.state as prev_state, r.lease_owner as prev_owner
                            from automation.runs r
                            where r.run_id = p.run_id and r.next_wake_at <= p_now
                              and r.state in ('pending', 'running', 'waiting', 'sleeping', 'compensating')
                            for update skip locked) x
    ), parked as (      -- behind an unfinished run of their partition: out of the due set until it finishes
        update automation.runs r
        set next_wake_at = p_park_until
        from (select x.run_id
              from (select run_id from cand where blocked) c
              cross join lateral (select y.run_id from automation.runs y
                                  where y.run_id = c.run_id and y.state = 'pending' and y.lease_owner is null
                                    and y.next_wake_at <= p_now
                                  for update skip locked) x) b
        where r.run_id = b.run_id
    ), flow_parked as ( -- behind a full key: until a holder lets a slot go (or :park_until); throttled: next token
        update automation.runs r
        set next_wake_at = case when o.by_key then p_park_until
                                else least(p_park_until, p_now + coalesce(
                                    (select make_interval(secs => ((1.0 - (t.avail - floor(t.avail))) * t.per_ms
                                                                   / t.max_n) / 1000.0)
                                     from tok t where t.project_id = r.project_id and t.key = r.flow_throttle),
                                    interval '1 second')) end,
            flow_parked_at = case when o.by_key then p_now else null end
        from (select v.run_id, v.by_key
              from over v
              cross join lateral (select y.run_id from automation.runs y
                                  where y.run_id = v.run_id and y.lease_owner is null and y.next_wake_at <= p_now
                                    and y.state in ('pending', 'waiting', 'sleeping', 'compensating')
                                  for update skip locked) x) o
        where r.run_id = o.run_id
    ), granted as (
        update automation.runs r
        set state = case when r.state = 'compensating' then 'compensating' else 'running' end,
            lease_owner = p_worker_id, lease_deadline = p_now + p_lease, next_wake_at = p_now + p_lease,
            lease_grants = r.lease_grants + 1,
            lease_reclaims = r.lease_reclaims + (due.prev_owner is not null)::integer,
            started_at = coalesce(r.started_at, p_now), updated_at = p_now, flow_parked_at = null
        from due
        where r.run_id = due.run_id
        returning r.run_id, r.project_id, r.workflow_id, r.version, r.state, r.input, r.idempotency_key,
                  r.trigger_id, r.event_id, r.partition_key, r.queue, r.epoch, r.current_step, r.failed_step,
                  r.error_code, r.error_message, r.lease_grants, r.lease_reclaims, r.deadline_at, r.created_at,
                  r.delivery, due.prev_state, due.prev_owner, r.flow_throttle, r.flow_keys, r.flow_caps
    ), key_parked as ( -- a key full once these grants are in: its other due runs parked with those of the window
        update automation.runs r
        set next_wake_at = p_park_until, flow_parked_at = p_now
        from (select x.run_id
              from (select f.project_id, f.key
                    from (select c.project_id, u.key, u.cap, 0 as n         -- full before this claim
                          from cand c cross join lateral unnest(c.flow_keys, c.flow_caps) u(key, cap)
                          where not c.reclaim
                          union all
                          select g.project_id, u.key, u.cap, 1              -- a slot this claim gave
                          from granted g cross join lateral unnest(g.flow_keys, g.flow_caps) u(key, cap)
                          where g.prev_state = 'pending' and g.prev_owner is null) f
                    left join fheld h on h.project_id = f.project_id and h.key = f.key
                    where p_limit > 0 and (select count(*) from cand) >= p_limit * 4
                    group by f.project_id, f.key
                    having coalesce(max(h.n), 0) + sum(f.n) >= min(f.cap)) k
              cross join lateral (select y.run_id from automation.runs y
                                  where y.flow_keys @> array[k.key] and y.project_id = k.project_id
                                    and y.state = 'pending' and y.lease_owner is null and y.next_wake_at <= p_now
                                    and y.flow_keyed
                                    and not exists (select 1 from cand c where c.run_id = y.run_id)
                                  for update skip locked) x) b
        where r.run_id = b.run_id
    ), tokens_used as ( -- the throttle rows locked and charged in the statement that grants
        update automation.flow_keys k
        set tokens = t.avail - g.n, refilled_at = p_now, used_at = p_now
        from (select g.project_id, g.flow_throttle as key, count(*)::integer as n
              from granted g where g.flow_throttle is not null and g.prev_owner is null
              group by 1, 2) g
        join tok t on t.project_id = g.project_id and t.key = g.key
        where k.project_id = g.project_id and k.key = g.key
    ), state_events as (
        insert into automation.run_events (run_id, project_id, at, kind, state, data)
        select run_id, project_id, p_now, 'run.state', state,
               jsonb_build_object('from', prev_state, 'worker', p_worker_id, 'grant', lease_grants)
        from granted
        where prev_state <> state
    ), reclaim_events as (
        insert into automation.run_events (run_id, project_id, at, kind, state, data)
        select run_id, project_id, p_now, 'lease.reclaimed', state,
               jsonb_build_object('previous_owner', prev_owner, 'worker', p_worker_id, 'grant', lease_grants)
        from granted
        where prev_owner is not null
    )
    select g.run_id, g.project_id, g.workflow_id, g.version, g.state, g.input, g.idempotency_key, g.trigger_id,
           g.event_id, g.partition_key, g.queue, g.epoch, g.current_step, g.failed_step, g.error_code,
           g.error_message, g.lease_grants, g.lease_reclaims, g.deadline_at, g.created_at, g.delivery,
           g.prev_state, g.prev_owner
    from granted g;
    perform set_config('enable_sort', sorting, true);
    perform set_config('plan_cache_mode', caching, true);
end
$$;

CREATE FUNCTION automation.metric_attempt_finished() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    if new.status = 'running' or (tg_op = 'UPDATE' and old.status <> 'running')
       or current_setting('a44.attempt_sums', true) = 'op' then
        return null;
    end if;
    insert into automation.metric_attempt_deltas (project_id, run_id, step_id, kind, status, retry, seconds)
    values (new.project_id, new.run_id, split_part(new.step_id, '[', 1), new.kind, new.status, new.attempt > 1,
            greatest(extract(epoch from new.finished_at - new.started_at), 0));
    return null;
end
$$;

CREATE FUNCTION automation.metric_attempts_fold() RETURNS bigint
    LANGUAGE plpgsql
    AS $$
declare
    moved bigint;
begin
    if not pg_try_advisory_xact_lock(hashtext('a44.automation.metric_attempts.fold')) then
        return null;
    end if;
    with d as (
        delete from automation.metric_attempt_deltas returning *
    ), rolled as (
        insert into automation.metric_attempts as m (project_id, workflow_id, step_id, kind, status, bucket, shard,
                                                     attempts, retries, seconds)
        select d.project_id, coalesce(r.workflow_id, ''), d.step_id, d.kind, d.status,
               automation.metric_bucket(d.seconds), 0, count(*), count(*) filter (where d.retry), sum(d.seconds)
        from d left join automation.runs r on r.run_id = d.run_id
        group by 1, 2, 3, 4, 5, 6
        order by 1, 2, 3, 4, 5, 6
        on conflict (project_id, workflow_id, step_id, kind, status, bucket, shard) do update
            set attempts = m.attempts + excluded.attempts, retries = m.retries + excluded.retries,
                seconds = m.seconds + excluded.seconds
        returning 1
    )
    select count(*) into moved from d;
    return moved;
end
$$;

CREATE FUNCTION automation.metric_attempts_fold_v2() RETURNS bigint
    LANGUAGE plpgsql
    AS $$
declare
    moved bigint;
begin
    if not pg_try_advisory_xact_lock(hashtext('a44.automation.metric_attempts.fold')) then
        return null;
    end if;
    with d as (
        delete from automation.metric_attempt_deltas returning project_id, run_id, step_id, kind, status,
            automation.metric_bucket(seconds) as bucket, 1 as attempts, retry::integer as retries, seconds
    ), s as (
        delete from automation.metric_attempt_sums returning *
    ), both_ as (
        select * from d union all select * from s
    ), rolled as (
        insert into automation.metric_attempts as m (project_id, workflow_id, step_id, kind, status, bucket, shard,
                                                     attempts, retries, seconds)
        select b.project_id, coalesce(r.workflow_id, ''), b.step_id, b.kind, b.status, b.bucket, 0,
               sum(b.attempts), sum(b.retries), sum(b.seconds)
        from both_ b left join automation.runs r on r.run_id = b.run_id
        group by 1, 2, 3, 4, 5, 6
        order by 1, 2, 3, 4, 5, 6
        on conflict (project_id, workflow_id, step_id, kind, status, bucket, shard) do update
            set attempts = m.attempts + excluded.attempts, retries = m.retries + excluded.retries,
                seconds = m.seconds + excluded.seconds
        returning 1
    )
    select coalesce(sum(attempts), 0) into moved from both_;
    return moved;
end
$$;

CREATE FUNCTION automation.metric_bucket(d double precision) RETURNS integer
    LANGUAGE sql IMMUTABLE
    AS $$ select count(*)::integer from unnest(automation.metric_duration_bounds()) b where b < d $$;

CREATE FUNCTION automation.metric_duration_bounds() RETURNS double precision[]
    LANGUAGE sql IMMUTABLE
    AS $$ select array[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]::float8[] $$;

CREATE FUNCTION automation.note_grant() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    new.grant_due_at := old.next_wake_at;
    new.granted_at := new.updated_at;
    return new;
end $$;

CREATE FUNCTION automation.notify_run_due() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    if new.next_wake_at is not null and new.lease_owner is null
       and (tg_op = 'INSERT' or new.next_wake_at is distinct from old.next_wake_at)
       and current_setting('a44.notify', true) is distinct from 'deferred' then
        perform pg_notify('a44_runs_due', (floor(extract(epoch from new.next_wake_at) * 1000))::bigint::text);
    end if;
    return null;
end
$$;

CREATE FUNCTION automation.notify_run_event() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    if current_setting('a44.notify', true) is distinct from 'deferred' then
        perform pg_notify('a44_run_events', new.run_id);
    end if;
    return null;
end
$$;

CREATE FUNCTION automation.partition_lock_release() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    if new.state in ('success', 'skipped', 'failed', 'timeout') then
        delete from automation.partition_locks l
        where l.project_id = new.project_id and l.workflow_id = new.workflow_id and l.step_id = new.step_id
          and l.partition = new.partition and l.run_id = new.run_id;
        if found then
            perform automation.partition_lock_wake(new.project_id, new.workflow_id, new.step_id, new.partition,
                                                   new.updated_at);
        end if;
    end if;
    return null;
end
$$;

CREATE FUNCTION automation.partition_lock_wake(p_project text, p_workflow text, p_step text, p_partition text, p_now timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    AS $$
declare
    woke integer;
begin
    with w as (
        update automation.runs r set next_wake_at = least(r.next_wake_at, p_now)
        from automation.partition_lock_waiters v
        where v.project_id = p_project and v.workflow_id = p_workflow and v.step_id = p_step
          and v.partition = p_partition and r.run_id = v.run_id and r.state = 'waiting' and r.lease_owner is null
        returning r.run_id
    )
    delete from automation.partition_lock_waiters v using w
    where v.project_id = p_project and v.workflow_id = p_workflow and v.step_id = p_step
      and v.partition = p_partition and v.run_id = w.run_id;
    get diagnostics woke = row_count;
    if woke > 0 then
        perform pg_notify('a44_runs_due', (floor(extract(epoch from p_now) * 1000))::bigint::text);
    end if;
end
$$;

CREATE FUNCTION automation.partition_locks_of_run_release() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
    l record;
begin
    delete from automation.partition_lock_waiters w where w.run_id = new.run_id;
    for l in delete from automation.partition_locks k where k.run_id = new.run_id
             returning k.project_id, k.workflow_id, k.step_id, k.partition loop
        perform automation.partition_lock_wake(l.project_id, l.workflow_id, l.step_id, l.partition, new.updated_at);
    end loop;
    return null;
end
$$;

CREATE FUNCTION automation.partition_locks_take(p_project text, p_workflow text, p_step text, p_run text, p_keys text[], p_wait boolean, p_now timestamp with time zone) RETURNS TABLE(partition text, holder text)
    LANGUAGE plpgsql
    AS $$
declare
    k text;
    h text;
    live boolean;
begin
    foreach k in array p_keys loop
        loop
            select l.run_id into h from automation.partition_locks l
            where l.project_id = p_project and l.workflow_id = p_workflow and l.step_id = p_step
              and l.partition = k
            for update;
            if not found then
                insert into automation.partition_locks (project_id, workflow_id, step_id, partition, run_id, taken_at)
                values (p_project, p_workflow, p_step, k, p_run, p_now)
                on conflict do nothing;
                if found then
                    delete from automation.partition_lock_waiters w
                    where w.project_id = p_project and w.workflow_id = p_workflow and w.step_id = p_step
                      and w.partition = k and w.run_id = p_run;
                    exit;
                end if;
                continue;           -- another run inserted it meanwhile: read it again
            end if;
            exit when h = p_run;
            select r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled') into live
            from automation.runs r where r.run_id = h;
            if not coalesce(live, false) then      -- a stale lock (its run ended without releasing it): take it over
                update automation.partition_locks l set run_id = p_run, taken_at = p_now
                where l.project_id = p_project and l.workflow_id = p_workflow and l.step_id = p_step
                  and l.partition = k;
                exit;
            end if;
            if p_wait then
                insert into automation.partition_lock_waiters (project_id, workflow_id, step_id, partition, run_id,
                                                               since)
                values (p_project, p_workflow, p_step, k, p_run, p_now)
                on conflict do nothing;
            end if;
            partition := k;
            holder := h;
            return next;
            exit;
        end loop;
    end loop;
end
$$;

CREATE FUNCTION automation.partition_locks_take_v2(p_project text, p_workflow text, p_step text, p_run text, p_keys text[], p_wait boolean, p_now timestamp with time zone) RETURNS TABLE(partition text, holder text)
    LANGUAGE plpgsql
    AS $$
declare
    k text;
    h text;
    live boolean;
    busy boolean;
begin
    foreach k in array (select coalesce(array_agg(distinct x order by x), '{}') from unnest(p_keys) x) loop
        loop
            select l.run_id into h from automation.partition_locks l
            where l.project_id = p_project and l.workflow_id = p_workflow and l.step_id = p_step
              and l.partition = k
            for update skip locked;
            busy := not found;
            if busy then            -- absent, or locked by another transaction: read what it last committed
                select l.run_id into h from automation.partition_locks l
                where l.project_id = p_project and l.workflow_id = p_workflow and l.step_id = p_step
                  and l.partition = k;
                if not found then
                    insert into automation.partition_locks (project_id, workflow_id, step_id, partition, run_id,
                                                            taken_at)
                    values (p_project, p_workflow, p_step, k, p_run, p_now)
                    on conflict do nothing;
                    if found then
                        delete from automation.partition_lock_waiters w
                        where w.project_id = p_project and w.workflow_id = p_workflow and w.step_id = p_step
                          and w.partition = k and w.run_id = p_run;
                        exit;
                    end if;
                    continue;           -- another run inserted it meanwhile: read it again
                end if;
            end if;
            exit when h = p_run;        -- this run's own key (nothing else locks it while the run is leased)
            if not busy then
                select r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')
                into live from automation.runs r where r.run_id = h;
                if not coalesce(live, false) then  -- a stale lock (its run ended without releasing it): take it over
                    update automation.partition_locks l set run_id = p_run, taken_at = p_now
                    where l.project_id = p_project and l.workflow_id = p_workflow and l.step_id = p_step
                      and l.partition = k;
                    exit;
                end if;
            end if;
            if p_wait then              -- held, or busy: refused now, never waited for
                insert into automation.partition_lock_waiters (project_id, workflow_id, step_id, partition, run_id,
                                                               since)
                values (p_project, p_workflow, p_step, k, p_run, p_now)
                on conflict do nothing;
            end if;
            partition := k;
            holder := h;
            return next;
            exit;
        end loop;
    end loop;
end
$$;

CREATE FUNCTION automation.promote_partition_next() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    if new.state in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')
       and old.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled') then
        update automation.runs n
        set next_wake_at = new.updated_at
        where n.run_id = (select p.run_id from automation.runs p
                          where p.project_id = new.project_id and p.queue = new.queue
                            and p.partition_key = new.partition_key and p.run_id <> new.run_id
                            and p.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')
                          order by p.seq
                          limit 1)
          and n.state = 'pending' and n.lease_owner is null and n.next_wake_at > new.updated_at;
    end if;
    return null;
end
$$;

CREATE FUNCTION automation.run_cancel(p_run_id text, p_project text, p_by text, p_reason text, p_compensate boolean, p_message text, p_now timestamp with time zone) RETURNS TABLE(outcome text, state text, prev_state text)
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.run_cancel_settle(p_run_id text, p_now timestamp with time zone, p_notify boolean) RETURNS TABLE(outcome text, state text, lease_owner text)
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.run_children_deliver() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.run_signal(p_project text, p_run text, p_name text, p_data jsonb, p_key text, p_by text, p_now timestamp with time zone) RETURNS TABLE(outcome text, state text, seq bigint)
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.run_signals_wake_any() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.run_waits_close() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    update automation.run_waits w set state = 'cancelled', closed_at = new.updated_at
    where w.run_id = new.run_id and w.state = 'open';
    return null;
end
$$;

CREATE FUNCTION automation.timer_fire_due(p_now timestamp with time zone, p_limit integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.timer_move(p_project text, p_run text, p_step text, p_due timestamp with time zone, p_now timestamp with time zone, p_kind text, p_who text, p_reason text) RETURNS text
    LANGUAGE plpgsql
    AS $$
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
        update automation.runs set next_wake_at = least(next_wake_at, p_due), updated_at = p_now
        where run_id = r.run_id;
        perform pg_notify('a44_runs_due', (floor(extract(epoch from least(p_due, p_now)) * 1000))::bigint::text);
    end if;
    return 'moved';
end
$$;

CREATE FUNCTION automation.wait_open(p_run text, p_epoch integer, p_step text, p_kind text, p_key text, p_timeout_at timestamp with time zone, p_now timestamp with time zone) RETURNS TABLE(state text, output jsonb, timeout_at timestamp with time zone)
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.wait_satisfy(p_run text, p_epoch integer, p_step text, p_seq bigint, p_name text, p_data jsonb, p_now timestamp with time zone) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION automation.wait_timeout(p_run text, p_epoch integer, p_step text, p_now timestamp with time zone) RETURNS TABLE(state text, output jsonb, timeout_at timestamp with time zone)
    LANGUAGE plpgsql
    AS $$
begin
    update automation.run_waits w set state = 'timed_out', closed_at = p_now
    where w.run_id = p_run and w.epoch = p_epoch and w.step_id = p_step and w.state = 'open'
      and w.timeout_at <= p_now;
    return query select w.state, w.output, w.timeout_at from automation.run_waits w
                 where w.run_id = p_run and w.epoch = p_epoch and w.step_id = p_step;
end
$$;

CREATE TABLE automation.alert_evaluator (
    singleton boolean DEFAULT true NOT NULL,
    holder text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    event_horizon bigint DEFAULT 0 NOT NULL,
    CONSTRAINT alert_evaluator_singleton_check CHECK (singleton)
);

CREATE TABLE automation.alert_history (
    id bigint NOT NULL,
    alert_id text NOT NULL,
    at timestamp with time zone NOT NULL,
    kind text NOT NULL,
    count integer NOT NULL,
    channels text[] NOT NULL
);

ALTER TABLE automation.alert_history ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME automation.alert_history_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE automation.alert_incidents (
    project_id text NOT NULL,
    channel text NOT NULL,
    cause text NOT NULL,
    notification_id bigint NOT NULL,
    alert_ids text[] NOT NULL,
    rules text[] NOT NULL,
    opened_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL
);

CREATE TABLE automation.alert_rules (
    project_id text NOT NULL,
    name text NOT NULL,
    metric text NOT NULL,
    filter text DEFAULT ''::text NOT NULL,
    condition text DEFAULT ''::text NOT NULL,
    severity text NOT NULL,
    notify text,
    escalate_to text,
    suppress_window_s double precision NOT NULL,
    update_every integer NOT NULL,
    origin text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT alert_rules_origin_check CHECK ((origin = ANY (ARRAY['cli'::text, 'yaml'::text]))),
    CONSTRAINT alert_rules_severity_check CHECK ((severity = ANY (ARRAY['p1'::text, 'p2'::text, 'p3'::text, 'p4'::text]))),
    CONSTRAINT alert_rules_suppress_window_s_check CHECK ((suppress_window_s > (0)::double precision)),
    CONSTRAINT alert_rules_update_every_check CHECK ((update_every > 0))
);

CREATE TABLE automation.alert_samples (
    project_id text NOT NULL,
    metric text NOT NULL,
    labels jsonb NOT NULL,
    at timestamp with time zone NOT NULL,
    value double precision NOT NULL
);

CREATE TABLE automation.alert_seen (
    event_id bigint NOT NULL
);

CREATE TABLE automation.alerts (
    alert_id text NOT NULL,
    project_id text NOT NULL,
    rule text NOT NULL,
    group_key text NOT NULL,
    state text NOT NULL,
    severity text NOT NULL,
    machine jsonb NOT NULL,
    context jsonb NOT NULL,
    opened_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    resolved_at timestamp with time zone,
    CONSTRAINT alerts_severity_check CHECK ((severity = ANY (ARRAY['p1'::text, 'p2'::text, 'p3'::text, 'p4'::text]))),
    CONSTRAINT alerts_state_check CHECK ((state = ANY (ARRAY['firing'::text, 'resolved'::text])))
);

CREATE TABLE automation.api_tokens (
    token_id text NOT NULL,
    project_id text NOT NULL,
    name text NOT NULL,
    token_sha256 text NOT NULL,
    scopes text[] NOT NULL,
    allow_cidrs cidr[] DEFAULT '{}'::cidr[] NOT NULL,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    last_used_at timestamp with time zone
);

CREATE TABLE automation.approval_decisions (
    id bigint NOT NULL,
    run_id text NOT NULL,
    epoch integer NOT NULL,
    step_id text NOT NULL,
    person text NOT NULL,
    decision text NOT NULL,
    comment text,
    via text NOT NULL,
    decided_at timestamp with time zone NOT NULL,
    CONSTRAINT approval_decisions_comment_check CHECK ((length(comment) <= 4000)),
    CONSTRAINT approval_decisions_decision_check CHECK ((decision = ANY (ARRAY['approve'::text, 'reject'::text]))),
    CONSTRAINT approval_decisions_via_check CHECK ((via = ANY (ARRAY['cli'::text, 'rest'::text, 'link'::text, 'console'::text])))
);

ALTER TABLE automation.approval_decisions ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME automation.approval_decisions_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE automation.approval_link_keys (
    id integer NOT NULL,
    key bytea NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT approval_link_keys_id_check CHECK ((id = 1))
);

CREATE TABLE automation.approval_link_uses (
    nonce text NOT NULL,
    used_at timestamp with time zone NOT NULL
);

CREATE TABLE automation.approval_requests (
    run_id text NOT NULL,
    epoch integer NOT NULL,
    step_id text NOT NULL,
    project_id text NOT NULL,
    groups text[] NOT NULL,
    escalate_groups text[] NOT NULL,
    min_approvals integer NOT NULL,
    allow_self boolean NOT NULL,
    initiator text,
    notify text,
    opened_at timestamp with time zone NOT NULL,
    timeout_at timestamp with time zone NOT NULL,
    escalate_at timestamp with time zone,
    remind_at timestamp with time zone[] NOT NULL,
    overdue_at timestamp with time zone,
    CONSTRAINT approval_requests_min_approvals_check CHECK ((min_approvals >= 1))
);

CREATE TABLE automation.approver_groups (
    project_id text NOT NULL,
    name text NOT NULL,
    members text[] NOT NULL,
    published_at timestamp with time zone NOT NULL
);

CREATE TABLE automation.circuit_breakers (
    project_id text NOT NULL,
    connector_id text NOT NULL,
    state text DEFAULT 'closed'::text NOT NULL,
    opened_until timestamp with time zone,
    open_for_ms integer DEFAULT 0 NOT NULL,
    probe_owner text,
    probe_until timestamp with time zone,
    opened_count integer DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT circuit_breakers_state_check CHECK ((state = ANY (ARRAY['closed'::text, 'open'::text, 'half_open'::text])))
);

CREATE TABLE automation.circuit_samples (
    project_id text NOT NULL,
    connector_id text NOT NULL,
    bucket timestamp with time zone NOT NULL,
    ok integer DEFAULT 0 NOT NULL,
    failed integer DEFAULT 0 NOT NULL
);

CREATE TABLE automation.connectors (
    project_id text NOT NULL,
    connector_id text NOT NULL,
    type text NOT NULL,
    definition jsonb NOT NULL,
    published_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL
);

CREATE TABLE automation.daemons (
    worker_id text NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    version text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    last_seen_at timestamp with time zone NOT NULL,
    stopped_at timestamp with time zone,
    in_flight integer DEFAULT 0 NOT NULL
);

CREATE TABLE automation.dead_letters (
    dead_letter_id text NOT NULL,
    project_id text NOT NULL,
    queue text,
    trigger_id text,
    workflow_id text,
    event_id text,
    envelope text NOT NULL,
    error_code text NOT NULL,
    error_message text,
    attempts integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone NOT NULL,
    envelope_bytes bytea,
    step_id text,
    run_id text,
    version integer,
    partition_key text,
    input jsonb,
    history jsonb DEFAULT '[]'::jsonb NOT NULL,
    redrive_of text,
    redriven_at timestamp with time zone,
    redriven_run_id text,
    CONSTRAINT dead_letters_id_prefix CHECK ((dead_letter_id ~~ 'dlq\_%'::text))
);

CREATE TABLE automation.event_correlations (
    cseq bigint NOT NULL,
    project_id text NOT NULL,
    type text NOT NULL,
    program_hash text NOT NULL,
    value text NOT NULL,
    event_id text NOT NULL,
    received_at timestamp with time zone NOT NULL
);

ALTER TABLE automation.event_correlations ALTER COLUMN cseq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME automation.event_correlations_cseq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE automation.event_deliveries (
    event_id text NOT NULL,
    trigger_id text NOT NULL,
    project_id text NOT NULL,
    outcome text NOT NULL,
    run_id text,
    at timestamp with time zone NOT NULL,
    CONSTRAINT event_deliveries_outcome_check CHECK ((outcome = ANY (ARRAY['created'::text, 'deduplicated'::text, 'filtered'::text, 'dead_lettered'::text, 'buffered'::text])))
);

CREATE TABLE automation.event_keys (
    project_id text NOT NULL,
    key text NOT NULL,
    event_id text NOT NULL,
    created_at timestamp with time zone NOT NULL
);

CREATE TABLE automation.event_wait_programs (
    project_id text NOT NULL,
    type text NOT NULL,
    program_hash text NOT NULL,
    program jsonb
);

CREATE TABLE automation.events (
    event_id text NOT NULL,
    project_id text NOT NULL,
    type text NOT NULL,
    idempotency_key text NOT NULL,
    partition_key text,
    trigger_id text,
    source text NOT NULL,
    occurred_at timestamp with time zone NOT NULL,
    received_at timestamp with time zone NOT NULL,
    envelope text NOT NULL,
    seq bigint NOT NULL,
    CONSTRAINT events_source_check CHECK ((source = ANY (ARRAY['bus'::text, 'webhook'::text])))
);

ALTER TABLE automation.events ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME automation.events_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE automation.flow_buffer_events (
    buffer_id text NOT NULL,
    project_id text NOT NULL,
    workflow_id text NOT NULL,
    event_id text NOT NULL,
    trigger_id text,
    seq bigint NOT NULL,
    occurred_at timestamp with time zone NOT NULL,
    received_at timestamp with time zone NOT NULL,
    bytes integer NOT NULL,
    envelope jsonb NOT NULL
);

ALTER TABLE automation.flow_buffer_events ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME automation.flow_buffer_events_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE automation.flow_buffer_keys (
    project_id text NOT NULL,
    key text NOT NULL,
    buffer_id text NOT NULL,
    event_id text NOT NULL,
    created_at timestamp with time zone NOT NULL
);

CREATE TABLE automation.flow_buffers (
    buffer_id text NOT NULL,
    project_id text NOT NULL,
    workflow_id text NOT NULL,
    kind text NOT NULL,
    buffer_key text NOT NULL,
    deliver text NOT NULL,
    queue text,
    partition_key text,
    state text DEFAULT 'open'::text NOT NULL,
    first_at timestamp with time zone NOT NULL,
    last_at timestamp with time zone NOT NULL,
    due_at timestamp with time zone NOT NULL,
    max_due_at timestamp with time zone NOT NULL,
    events integer DEFAULT 0 NOT NULL,
    bytes bigint DEFAULT 0 NOT NULL,
    flushed_at timestamp with time zone,
    flush_reason text,
    run_id text,
    CONSTRAINT flow_buffers_buffer_id_check CHECK ((buffer_id ~~ 'fb\_%'::text)),
    CONSTRAINT flow_buffers_check CHECK (((state = 'open'::text) = (flushed_at IS NULL))),
    CONSTRAINT flow_buffers_deliver_check CHECK ((deliver = ANY (ARRAY['last'::text, 'first'::text, 'all'::text]))),
    CONSTRAINT flow_buffers_flush_reason_check CHECK ((flush_reason = ANY (ARRAY['quiet'::text, 'maxWait'::text, 'maxSize'::text, 'maxBytes'::text]))),
    CONSTRAINT flow_buffers_kind_check CHECK ((kind = ANY (ARRAY['debounce'::text, 'batch'::text]))),
    CONSTRAINT flow_buffers_state_check CHECK ((state = ANY (ARRAY['open'::text, 'flushed'::text])))
);

CREATE TABLE automation.flow_keys (
    project_id text NOT NULL,
    key text NOT NULL,
    limit_id text NOT NULL,
    value text NOT NULL,
    kind text NOT NULL,
    max_n integer NOT NULL,
    per_ms bigint,
    burst integer,
    tokens double precision,
    refilled_at timestamp with time zone,
    created_at timestamp with time zone NOT NULL,
    used_at timestamp with time zone NOT NULL,
    CONSTRAINT flow_keys_kind_check CHECK ((kind = ANY (ARRAY['concurrency'::text, 'fairness'::text, 'throttle'::text, 'rate'::text]))),
    CONSTRAINT flow_keys_max_n_check CHECK ((max_n > 0))
);

CREATE TABLE automation.flow_limit_keys (
    project_id text NOT NULL,
    limit_id text NOT NULL,
    live_keys bigint DEFAULT 0 NOT NULL,
    skipped bigint DEFAULT 0 NOT NULL
);

CREATE TABLE automation.flow_pauses (
    project_id text NOT NULL,
    key text NOT NULL,
    paused_until timestamp with time zone NOT NULL,
    source text NOT NULL,
    reason text,
    paused_by text,
    resumed_by text,
    paused_at timestamp with time zone NOT NULL,
    paused_count integer DEFAULT 1 NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT flow_pauses_source_check CHECK ((source = ANY (ARRAY['upstream'::text, 'operator'::text])))
);

CREATE TABLE automation.idempotency_keys (
    project_id text NOT NULL,
    key text NOT NULL,
    run_id text NOT NULL,
    created_at timestamp with time zone NOT NULL
);

CREATE TABLE automation.log_archive_days (
    day date NOT NULL,
    rows bigint NOT NULL,
    path text NOT NULL,
    archived_at timestamp with time zone NOT NULL,
    CONSTRAINT log_archive_days_rows_check CHECK ((rows >= 0))
);

CREATE TABLE automation.metric_attempt_deltas (
    project_id text NOT NULL,
    run_id text NOT NULL,
    step_id text NOT NULL,
    kind text NOT NULL,
    status text NOT NULL,
    retry boolean NOT NULL,
    seconds double precision NOT NULL
);

CREATE TABLE automation.metric_attempt_sums (
    project_id text NOT NULL,
    run_id text NOT NULL,
    step_id text NOT NULL,
    kind text NOT NULL,
    status text NOT NULL,
    bucket integer NOT NULL,
    attempts integer NOT NULL,
    retries integer NOT NULL,
    seconds double precision NOT NULL
);

CREATE TABLE automation.metric_attempts (
    project_id text NOT NULL,
    workflow_id text NOT NULL,
    step_id text NOT NULL,
    kind text NOT NULL,
    status text NOT NULL,
    bucket integer NOT NULL,
    shard integer NOT NULL,
    attempts bigint DEFAULT 0 NOT NULL,
    retries bigint DEFAULT 0 NOT NULL,
    seconds double precision DEFAULT 0 NOT NULL
);

CREATE TABLE automation.metric_counters (
    name text NOT NULL,
    labels jsonb NOT NULL,
    value bigint DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT metric_counters_value_check CHECK ((value >= 0))
);

CREATE TABLE automation.notification_channels (
    project_id text NOT NULL,
    name text NOT NULL,
    kind text NOT NULL,
    config jsonb NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT notification_channels_kind_check CHECK ((kind = ANY (ARRAY['webhook'::text, 'slack'::text, 'email'::text])))
);

CREATE TABLE automation.notifications (
    id bigint NOT NULL,
    project_id text NOT NULL,
    channel text NOT NULL,
    idempotency_key text NOT NULL,
    alert_id text,
    kind text NOT NULL,
    severity text NOT NULL,
    payload jsonb NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone NOT NULL,
    last_error text,
    created_at timestamp with time zone NOT NULL,
    delivered_at timestamp with time zone,
    CONSTRAINT notifications_kind_check CHECK ((kind = ANY (ARRAY['firing'::text, 'update'::text, 'escalation'::text, 'resolved'::text, 'test'::text]))),
    CONSTRAINT notifications_severity_check CHECK ((severity = ANY (ARRAY['p1'::text, 'p2'::text, 'p3'::text, 'p4'::text]))),
    CONSTRAINT notifications_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'delivered'::text, 'failed'::text])))
);

ALTER TABLE automation.notifications ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME automation.notifications_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE automation.partition_items (
    run_id text NOT NULL,
    step_id text NOT NULL,
    ordinal integer NOT NULL,
    partition text NOT NULL,
    item jsonb
);

CREATE TABLE automation.partition_lock_waiters (
    project_id text NOT NULL,
    workflow_id text NOT NULL,
    step_id text NOT NULL,
    partition text NOT NULL,
    run_id text NOT NULL,
    since timestamp with time zone NOT NULL
);

CREATE TABLE automation.partition_locks (
    project_id text NOT NULL,
    workflow_id text NOT NULL,
    step_id text NOT NULL,
    partition text NOT NULL,
    run_id text NOT NULL,
    taken_at timestamp with time zone NOT NULL
);

CREATE TABLE automation.partition_plans (
    run_id text NOT NULL,
    step_id text NOT NULL,
    project_id text NOT NULL,
    workflow_id text NOT NULL,
    source text NOT NULL,
    keys jsonb,
    epoch integer NOT NULL,
    planned_at timestamp with time zone NOT NULL,
    item_count integer
);

CREATE TABLE automation.queues (
    project_id text NOT NULL,
    queue_id text NOT NULL,
    max_concurrency integer NOT NULL,
    ordering text DEFAULT 'none'::text NOT NULL,
    max_attempts integer DEFAULT 3 NOT NULL,
    dead_letter_enabled boolean DEFAULT true NOT NULL,
    max_age_ms bigint,
    definition jsonb NOT NULL,
    published_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT queues_max_age_ms_check CHECK (((max_age_ms IS NULL) OR (max_age_ms > 0))),
    CONSTRAINT queues_max_attempts_check CHECK ((max_attempts > 0)),
    CONSTRAINT queues_max_concurrency_check CHECK ((max_concurrency > 0)),
    CONSTRAINT queues_ordering_check CHECK ((ordering = ANY (ARRAY['none'::text, 'by-partition'::text])))
);

CREATE TABLE automation.run_children (
    child_run_id text NOT NULL,
    parent_run_id text NOT NULL,
    parent_epoch integer NOT NULL,
    step_id text NOT NULL,
    kind text NOT NULL,
    root_run_id text NOT NULL,
    depth integer NOT NULL,
    wait text NOT NULL,
    on_parent_cancel text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT run_children_depth_check CHECK ((depth >= 1)),
    CONSTRAINT run_children_kind_check CHECK ((kind = ANY (ARRAY['action'::text, 'compensation'::text]))),
    CONSTRAINT run_children_on_parent_cancel_check CHECK ((on_parent_cancel = ANY (ARRAY['cancel'::text, 'abandon'::text]))),
    CONSTRAINT run_children_wait_check CHECK ((wait = ANY (ARRAY['result'::text, 'started'::text, 'none'::text])))
);

CREATE TABLE automation.run_event_waits (
    run_id text NOT NULL,
    epoch integer NOT NULL,
    step_id text NOT NULL,
    project_id text NOT NULL,
    type text NOT NULL,
    program_hash text NOT NULL,
    value text NOT NULL,
    lookback_ms bigint,
    cursor bigint DEFAULT 0 NOT NULL,
    before_since integer DEFAULT 0 NOT NULL,
    cel_errors integer DEFAULT 0 NOT NULL,
    branch integer DEFAULT 0 NOT NULL
);

CREATE TABLE automation.run_events (
    id bigint NOT NULL,
    run_id text NOT NULL,
    project_id text NOT NULL,
    at timestamp with time zone NOT NULL,
    kind text NOT NULL,
    state text,
    step_id text,
    attempt integer,
    status text,
    error_code text,
    message text,
    data jsonb
);

ALTER TABLE automation.run_events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME automation.run_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE automation.run_initiators (
    run_id text NOT NULL,
    initiator text NOT NULL
);

CREATE TABLE automation.run_partitions (
    run_id text NOT NULL,
    project_id text NOT NULL,
    workflow_id text NOT NULL,
    step_id text NOT NULL,
    partition text NOT NULL,
    ordinal integer NOT NULL,
    epoch integer NOT NULL,
    state text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    error_code text,
    error_message text,
    rows jsonb,
    worker_id text,
    skipped_by text,
    skip_reason text,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT run_partitions_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'running'::text, 'success'::text, 'failed'::text, 'retrying'::text, 'skipped'::text, 'timeout'::text])))
);

CREATE TABLE automation.run_signals (
    seq bigint NOT NULL,
    run_id text NOT NULL,
    name text NOT NULL,
    data jsonb,
    idempotency_key text,
    sent_by text,
    received_at timestamp with time zone NOT NULL,
    consumed_epoch integer,
    consumed_step text,
    consumed_at timestamp with time zone
);

ALTER TABLE automation.run_signals ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME automation.run_signals_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE automation.run_trace_context (
    project_id text NOT NULL,
    run_key text NOT NULL,
    at timestamp with time zone NOT NULL,
    traceparent text NOT NULL,
    tracestate text
);

CREATE TABLE automation.run_wait_signals (
    run_id text NOT NULL,
    epoch integer NOT NULL,
    step_id text NOT NULL,
    branch integer NOT NULL,
    name text NOT NULL
);

CREATE TABLE automation.run_waits (
    run_id text NOT NULL,
    epoch integer NOT NULL,
    step_id text NOT NULL,
    kind text NOT NULL,
    key text NOT NULL,
    opened_at timestamp with time zone NOT NULL,
    timeout_at timestamp with time zone NOT NULL,
    state text DEFAULT 'open'::text NOT NULL,
    output jsonb,
    satisfied_by text,
    closed_at timestamp with time zone,
    resumed_at timestamp with time zone,
    CONSTRAINT run_waits_kind_check CHECK ((kind = ANY (ARRAY['signal'::text, 'event'::text, 'any'::text, 'approval'::text, 'child'::text]))),
    CONSTRAINT run_waits_state_check CHECK ((state = ANY (ARRAY['open'::text, 'satisfied'::text, 'timed_out'::text, 'cancelled'::text])))
);

CREATE TABLE automation.runs (
    run_id text NOT NULL,
    project_id text NOT NULL,
    workflow_id text NOT NULL,
    version integer NOT NULL,
    state text NOT NULL,
    input jsonb DEFAULT '{}'::jsonb NOT NULL,
    idempotency_key text NOT NULL,
    trigger_id text,
    event_id text,
    partition_key text,
    queue text,
    epoch integer DEFAULT 0 NOT NULL,
    current_step text,
    failed_step text,
    error_code text,
    error_message text,
    result jsonb,
    summary jsonb,
    lease_owner text,
    lease_deadline timestamp with time zone,
    lease_grants integer DEFAULT 0 NOT NULL,
    lease_reclaims integer DEFAULT 0 NOT NULL,
    next_wake_at timestamp with time zone,
    deadline_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    updated_at timestamp with time zone NOT NULL,
    seq bigint NOT NULL,
    delivery integer DEFAULT 1 NOT NULL,
    origin_run_id text,
    dead_letter_id text,
    grant_due_at timestamp with time zone,
    granted_at timestamp with time zone,
    cancel_requested_at timestamp with time zone,
    cancelled_by text,
    cancel_reason text,
    cancel_compensate boolean,
    event_seq bigint DEFAULT automation.events_watermark(),
    flow_keyed boolean,
    flow_keys text[],
    flow_caps integer[],
    flow_hold boolean[],
    flow_holds boolean DEFAULT false NOT NULL,
    flow_throttle text,
    flow_parked_at timestamp with time zone,
    flow_weights double precision[],
    flow_priority smallint,
    CONSTRAINT runs_lease_check CHECK (((lease_owner IS NULL) = (lease_deadline IS NULL))),
    CONSTRAINT runs_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'running'::text, 'waiting'::text, 'sleeping'::text, 'awaiting_confirmation'::text, 'compensating'::text, 'blocked_version'::text, 'succeeded'::text, 'partial'::text, 'failed'::text, 'compensation_failed'::text, 'cancelled'::text])))
);

CREATE SEQUENCE automation.runs_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE automation.runs_seq_seq OWNED BY automation.runs.seq;

CREATE TABLE automation.schedule_occurrences (
    project_id text NOT NULL,
    trigger_id text NOT NULL,
    occurrence_key text NOT NULL,
    fire_at timestamp with time zone NOT NULL,
    status text NOT NULL,
    run_id text,
    catch_up boolean DEFAULT false NOT NULL,
    expires_at timestamp with time zone,
    error_code text,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT schedule_occurrences_status_check CHECK ((status = ANY (ARRAY['started'::text, 'skipped_overlap'::text, 'queued'::text, 'expired'::text, 'missed'::text])))
);

CREATE TABLE automation.schema_compat (
    number integer NOT NULL,
    name text NOT NULL,
    min_daemon_schema integer NOT NULL,
    destructive text
);

CREATE TABLE automation.schema_migrations (
    number integer NOT NULL,
    name text NOT NULL,
    sha256 text NOT NULL,
    applied_at timestamp with time zone NOT NULL
);

CREATE TABLE automation.step_attempts_default (
    run_id text CONSTRAINT step_attempts_run_id_not_null NOT NULL,
    step_id text CONSTRAINT step_attempts_step_id_not_null NOT NULL,
    attempt integer CONSTRAINT step_attempts_attempt_not_null NOT NULL,
    idempotency_key text CONSTRAINT step_attempts_idempotency_key_not_null NOT NULL,
    status text CONSTRAINT step_attempts_status_not_null NOT NULL,
    error_code text,
    started_at timestamp with time zone CONSTRAINT step_attempts_started_at_not_null NOT NULL,
    finished_at timestamp with time zone,
    result jsonb,
    result_ref text,
    result_bytes integer,
    error_message text,
    epoch integer DEFAULT 0 CONSTRAINT step_attempts_epoch_not_null NOT NULL,
    kind text DEFAULT 'action'::text CONSTRAINT step_attempts_kind_not_null NOT NULL,
    project_id text CONSTRAINT step_attempts_project_id_not_null NOT NULL,
    worker_id text,
    lease_grant integer,
    retry_at timestamp with time zone,
    due_at timestamp with time zone,
    CONSTRAINT step_attempts_attempt_check CHECK ((attempt >= 1)),
    CONSTRAINT step_attempts_finished_check CHECK (((status = 'running'::text) = (finished_at IS NULL))),
    CONSTRAINT step_attempts_kind_check CHECK ((kind = ANY (ARRAY['action'::text, 'compensation'::text]))),
    CONSTRAINT step_attempts_result_check CHECK (((result IS NULL) OR (result_ref IS NULL))),
    CONSTRAINT step_attempts_status_check CHECK ((status = ANY (ARRAY['running'::text, 'succeeded'::text, 'failed'::text, 'timeout'::text, 'skipped'::text, 'compensated'::text, 'compensation_failed'::text, 'lease_expired'::text, 'cancelled'::text])))
);

CREATE TABLE automation.step_rows (
    run_id text NOT NULL,
    step_id text NOT NULL,
    partition text DEFAULT ''::text NOT NULL,
    epoch integer NOT NULL,
    rows_in bigint,
    rows_out bigint,
    rows_error bigint,
    recorded_at timestamp with time zone NOT NULL,
    CONSTRAINT step_rows_rows_error_check CHECK ((rows_error >= 0)),
    CONSTRAINT step_rows_rows_in_check CHECK ((rows_in >= 0)),
    CONSTRAINT step_rows_rows_out_check CHECK ((rows_out >= 0))
);

CREATE TABLE automation.triggers (
    project_id text NOT NULL,
    trigger_id text NOT NULL,
    type text NOT NULL,
    workflow_id text NOT NULL,
    event text,
    ir jsonb NOT NULL,
    origin text DEFAULT 'standalone'::text NOT NULL,
    active boolean DEFAULT true NOT NULL,
    published_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT triggers_origin_check CHECK ((origin = ANY (ARRAY['standalone'::text, 'inline'::text]))),
    CONSTRAINT triggers_type_check CHECK ((type = ANY (ARRAY['event'::text, 'webhook'::text, 'schedule'::text, 'manual'::text])))
);

CREATE TABLE automation.webhook_secrets (
    secret_id text NOT NULL,
    project_id text NOT NULL,
    trigger_id text NOT NULL,
    secret text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone,
    revealed_at timestamp with time zone
);

CREATE TABLE automation.workflow_versions (
    project_id text NOT NULL,
    workflow_id text NOT NULL,
    version integer NOT NULL,
    sha256 text NOT NULL,
    ir jsonb NOT NULL,
    published_at timestamp with time zone NOT NULL,
    max_concurrency integer GENERATED ALWAYS AS (COALESCE((((ir -> 'concurrency'::text) ->> 'max'::text))::integer, 100)) STORED,
    has_flow boolean GENERATED ALWAYS AS (((ir -> 'flow'::text) IS NOT NULL)) STORED,
    CONSTRAINT workflow_versions_sha256_check CHECK ((sha256 <> ''::text)),
    CONSTRAINT workflow_versions_version_check CHECK ((version > 0))
);

ALTER TABLE ONLY automation.step_attempts ATTACH PARTITION automation.step_attempts_default DEFAULT;

ALTER TABLE ONLY automation.runs ALTER COLUMN seq SET DEFAULT nextval('automation.runs_seq_seq'::regclass);

ALTER TABLE ONLY automation.alert_evaluator
    ADD CONSTRAINT alert_evaluator_pkey PRIMARY KEY (singleton);

ALTER TABLE ONLY automation.alert_history
    ADD CONSTRAINT alert_history_pkey PRIMARY KEY (id);

ALTER TABLE ONLY automation.alert_incidents
    ADD CONSTRAINT alert_incidents_pkey PRIMARY KEY (project_id, channel, cause);

ALTER TABLE ONLY automation.alert_rules
    ADD CONSTRAINT alert_rules_pkey PRIMARY KEY (project_id, name);

ALTER TABLE ONLY automation.alert_seen
    ADD CONSTRAINT alert_seen_pkey PRIMARY KEY (event_id);

ALTER TABLE ONLY automation.alerts
    ADD CONSTRAINT alerts_pkey PRIMARY KEY (alert_id);

ALTER TABLE ONLY automation.api_tokens
    ADD CONSTRAINT api_tokens_pkey PRIMARY KEY (token_id);

ALTER TABLE ONLY automation.api_tokens
    ADD CONSTRAINT api_tokens_sha256_key UNIQUE (token_sha256);

ALTER TABLE ONLY automation.approval_decisions
    ADD CONSTRAINT approval_decisions_once UNIQUE (run_id, epoch, step_id, person);

ALTER TABLE ONLY automation.approval_decisions
    ADD CONSTRAINT approval_decisions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY automation.approval_link_keys
    ADD CONSTRAINT approval_link_keys_pkey PRIMARY KEY (id);

ALTER TABLE ONLY automation.approval_link_uses
    ADD CONSTRAINT approval_link_uses_pkey PRIMARY KEY (nonce);

ALTER TABLE ONLY automation.approval_requests
    ADD CONSTRAINT approval_requests_pkey PRIMARY KEY (run_id, epoch, step_id);

ALTER TABLE ONLY automation.approver_groups
    ADD CONSTRAINT approver_groups_pkey PRIMARY KEY (project_id, name);

ALTER TABLE ONLY automation.circuit_breakers
    ADD CONSTRAINT circuit_breakers_pkey PRIMARY KEY (project_id, connector_id);

ALTER TABLE ONLY automation.circuit_samples
    ADD CONSTRAINT circuit_samples_pkey PRIMARY KEY (project_id, connector_id, bucket);

ALTER TABLE ONLY automation.connectors
    ADD CONSTRAINT connectors_pkey PRIMARY KEY (project_id, connector_id);

ALTER TABLE ONLY automation.daemons
    ADD CONSTRAINT daemons_pkey PRIMARY KEY (worker_id);

ALTER TABLE ONLY automation.dead_letters
    ADD CONSTRAINT dead_letters_pkey PRIMARY KEY (dead_letter_id);

ALTER TABLE ONLY automation.event_correlations
    ADD CONSTRAINT event_correlations_pkey PRIMARY KEY (cseq);

ALTER TABLE ONLY automation.event_deliveries
    ADD CONSTRAINT event_deliveries_pkey PRIMARY KEY (event_id, trigger_id);

ALTER TABLE ONLY automation.event_keys
    ADD CONSTRAINT event_keys_pkey PRIMARY KEY (project_id, key);

ALTER TABLE ONLY automation.event_wait_programs
    ADD CONSTRAINT event_wait_programs_pkey PRIMARY KEY (project_id, type, program_hash);

ALTER TABLE ONLY automation.events
    ADD CONSTRAINT events_pkey PRIMARY KEY (event_id);

ALTER TABLE ONLY automation.flow_buffer_events
    ADD CONSTRAINT flow_buffer_events_pkey PRIMARY KEY (buffer_id, event_id);

ALTER TABLE ONLY automation.flow_buffer_events
    ADD CONSTRAINT flow_buffer_events_project_id_workflow_id_event_id_key UNIQUE (project_id, workflow_id, event_id);

ALTER TABLE ONLY automation.flow_buffer_keys
    ADD CONSTRAINT flow_buffer_keys_pkey PRIMARY KEY (project_id, key);

ALTER TABLE ONLY automation.flow_buffers
    ADD CONSTRAINT flow_buffers_pkey PRIMARY KEY (buffer_id);

ALTER TABLE ONLY automation.flow_keys
    ADD CONSTRAINT flow_keys_pkey PRIMARY KEY (project_id, key);

ALTER TABLE ONLY automation.flow_limit_keys
    ADD CONSTRAINT flow_limit_keys_pkey PRIMARY KEY (project_id, limit_id);

ALTER TABLE ONLY automation.flow_pauses
    ADD CONSTRAINT flow_pauses_pkey PRIMARY KEY (project_id, key);

ALTER TABLE ONLY automation.idempotency_keys
    ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (project_id, key);

ALTER TABLE ONLY automation.log_archive_days
    ADD CONSTRAINT log_archive_days_pkey PRIMARY KEY (day);

ALTER TABLE ONLY automation.metric_attempts
    ADD CONSTRAINT metric_attempts_pkey PRIMARY KEY (project_id, workflow_id, step_id, kind, status, bucket, shard);

ALTER TABLE ONLY automation.metric_counters
    ADD CONSTRAINT metric_counters_pkey PRIMARY KEY (name, labels);

ALTER TABLE ONLY automation.notification_channels
    ADD CONSTRAINT notification_channels_pkey PRIMARY KEY (project_id, name);

ALTER TABLE ONLY automation.notifications
    ADD CONSTRAINT notifications_key_unique UNIQUE (project_id, idempotency_key);

ALTER TABLE ONLY automation.notifications
    ADD CONSTRAINT notifications_pkey PRIMARY KEY (id);

ALTER TABLE ONLY automation.partition_items
    ADD CONSTRAINT partition_items_pkey PRIMARY KEY (run_id, step_id, ordinal);

ALTER TABLE ONLY automation.partition_lock_waiters
    ADD CONSTRAINT partition_lock_waiters_pkey PRIMARY KEY (project_id, workflow_id, step_id, partition, run_id);

ALTER TABLE ONLY automation.partition_locks
    ADD CONSTRAINT partition_locks_pkey PRIMARY KEY (project_id, workflow_id, step_id, partition);

ALTER TABLE ONLY automation.partition_plans
    ADD CONSTRAINT partition_plans_pkey PRIMARY KEY (run_id, step_id);

ALTER TABLE ONLY automation.queues
    ADD CONSTRAINT queues_pkey PRIMARY KEY (project_id, queue_id);

ALTER TABLE ONLY automation.run_children
    ADD CONSTRAINT run_children_pkey PRIMARY KEY (child_run_id);

ALTER TABLE ONLY automation.run_children
    ADD CONSTRAINT run_children_step UNIQUE (parent_run_id, parent_epoch, step_id, kind);

ALTER TABLE ONLY automation.run_event_waits
    ADD CONSTRAINT run_event_waits_pkey PRIMARY KEY (run_id, epoch, step_id, branch);

ALTER TABLE ONLY automation.run_events
    ADD CONSTRAINT run_events_pkey PRIMARY KEY (id);

ALTER TABLE ONLY automation.run_initiators
    ADD CONSTRAINT run_initiators_pkey PRIMARY KEY (run_id);

ALTER TABLE ONLY automation.run_partitions
    ADD CONSTRAINT run_partitions_pkey PRIMARY KEY (run_id, step_id, partition);

ALTER TABLE ONLY automation.run_signals
    ADD CONSTRAINT run_signals_key UNIQUE (run_id, idempotency_key);

ALTER TABLE ONLY automation.run_signals
    ADD CONSTRAINT run_signals_pkey PRIMARY KEY (seq);

ALTER TABLE ONLY automation.run_trace_context
    ADD CONSTRAINT run_trace_context_pkey PRIMARY KEY (project_id, run_key);

ALTER TABLE ONLY automation.run_wait_signals
    ADD CONSTRAINT run_wait_signals_pkey PRIMARY KEY (run_id, epoch, step_id, branch);

ALTER TABLE ONLY automation.run_waits
    ADD CONSTRAINT run_waits_pkey PRIMARY KEY (run_id, epoch, step_id);

ALTER TABLE ONLY automation.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (run_id);

ALTER TABLE ONLY automation.schedule_occurrences
    ADD CONSTRAINT schedule_occurrences_pkey PRIMARY KEY (project_id, occurrence_key);

ALTER TABLE ONLY automation.schema_compat
    ADD CONSTRAINT schema_compat_pkey PRIMARY KEY (number);

ALTER TABLE ONLY automation.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (number);

ALTER TABLE ONLY automation.step_attempts
    ADD CONSTRAINT step_attempts_pkey PRIMARY KEY (run_id, step_id, epoch, kind, attempt, started_at);

ALTER TABLE ONLY automation.step_attempts_default
    ADD CONSTRAINT step_attempts_default_pkey PRIMARY KEY (run_id, step_id, epoch, kind, attempt, started_at);

ALTER TABLE ONLY automation.step_rows
    ADD CONSTRAINT step_rows_pkey PRIMARY KEY (run_id, step_id, partition);

ALTER TABLE ONLY automation.triggers
    ADD CONSTRAINT triggers_pkey PRIMARY KEY (project_id, trigger_id);

ALTER TABLE ONLY automation.webhook_secrets
    ADD CONSTRAINT webhook_secrets_pkey PRIMARY KEY (secret_id);

ALTER TABLE ONLY automation.workflow_versions
    ADD CONSTRAINT workflow_versions_pkey PRIMARY KEY (project_id, workflow_id, version);

CREATE INDEX alert_history_alert_idx ON automation.alert_history USING btree (alert_id, id);

CREATE INDEX alert_incidents_opened_idx ON automation.alert_incidents USING btree (opened_at);

CREATE INDEX alert_samples_at_idx ON automation.alert_samples USING btree (at);

CREATE INDEX alert_samples_series_idx ON automation.alert_samples USING btree (project_id, metric, at);

CREATE UNIQUE INDEX alerts_firing_idx ON automation.alerts USING btree (project_id, rule, group_key) WHERE (state = 'firing'::text);

CREATE INDEX alerts_project_idx ON automation.alerts USING btree (project_id, opened_at DESC);

CREATE INDEX approval_requests_project_idx ON automation.approval_requests USING btree (project_id, opened_at);

CREATE INDEX dead_letters_project_idx ON automation.dead_letters USING btree (project_id, created_at DESC);

CREATE INDEX dead_letters_queue_idx ON automation.dead_letters USING btree (project_id, queue, created_at);

CREATE INDEX dead_letters_run_idx ON automation.dead_letters USING btree (run_id) WHERE (run_id IS NOT NULL);

CREATE INDEX dead_letters_waiting_idx ON automation.dead_letters USING btree (project_id, queue, created_at) WHERE (redriven_at IS NULL);

CREATE INDEX event_correlations_key_idx ON automation.event_correlations USING btree (project_id, type, program_hash, value, cseq);

CREATE INDEX event_keys_created_idx ON automation.event_keys USING btree (created_at);

CREATE INDEX events_project_received_idx ON automation.events USING btree (project_id, received_at DESC);

CREATE INDEX events_project_type_idx ON automation.events USING btree (project_id, type, received_at DESC);

CREATE UNIQUE INDEX events_seq_idx ON automation.events USING btree (seq);

CREATE INDEX flow_buffers_due ON automation.flow_buffers USING btree (due_at) WHERE (state = 'open'::text);

CREATE UNIQUE INDEX flow_buffers_open ON automation.flow_buffers USING btree (project_id, workflow_id, kind, buffer_key) WHERE (state = 'open'::text);

CREATE INDEX flow_buffers_run ON automation.flow_buffers USING btree (run_id) WHERE (run_id IS NOT NULL);

CREATE INDEX flow_keys_idle_idx ON automation.flow_keys USING btree (used_at);

CREATE INDEX flow_keys_limit_idx ON automation.flow_keys USING btree (project_id, limit_id);

CREATE INDEX idempotency_keys_created_idx ON automation.idempotency_keys USING btree (created_at);

CREATE INDEX notifications_alert_idx ON automation.notifications USING btree (alert_id, id) WHERE (alert_id IS NOT NULL);

CREATE INDEX notifications_due_idx ON automation.notifications USING btree (next_attempt_at) WHERE (state = 'pending'::text);

CREATE INDEX partition_lock_waiters_run_idx ON automation.partition_lock_waiters USING btree (run_id);

CREATE INDEX partition_locks_run_idx ON automation.partition_locks USING btree (run_id);

CREATE INDEX run_children_root_idx ON automation.run_children USING btree (root_run_id);

CREATE INDEX run_event_waits_key_idx ON automation.run_event_waits USING btree (project_id, type, program_hash, value);

CREATE INDEX run_events_outcome_idx ON automation.run_events USING btree (id) WHERE ((kind = 'run.state'::text) AND (state = ANY (ARRAY['failed'::text, 'partial'::text, 'compensation_failed'::text, 'awaiting_confirmation'::text, 'succeeded'::text])));

CREATE INDEX run_events_run_idx ON automation.run_events USING btree (run_id, id);

CREATE INDEX run_partitions_failed_idx ON automation.run_partitions USING btree (run_id, step_id, ordinal) WHERE (state = ANY (ARRAY['failed'::text, 'timeout'::text]));

CREATE INDEX run_partitions_order_idx ON automation.run_partitions USING btree (run_id, step_id, ordinal);

CREATE INDEX run_partitions_step_idx ON automation.run_partitions USING btree (project_id, workflow_id, step_id, partition);

CREATE INDEX run_partitions_workflow_idx ON automation.run_partitions USING btree (project_id, workflow_id, partition, updated_at DESC);

CREATE INDEX run_signals_unconsumed_idx ON automation.run_signals USING btree (run_id, name, seq) WHERE (consumed_at IS NULL);

CREATE INDEX run_wait_signals_name_idx ON automation.run_wait_signals USING btree (run_id, name);

CREATE INDEX run_waits_open_idx ON automation.run_waits USING btree (run_id, kind, key, opened_at) WHERE (state = 'open'::text);

CREATE INDEX runs_due_idx ON automation.runs USING btree (next_wake_at) WHERE (next_wake_at IS NOT NULL);

CREATE INDEX runs_finished_idx ON automation.runs USING btree (finished_at) WHERE (finished_at IS NOT NULL);

CREATE INDEX runs_flow_holding_idx ON automation.runs USING btree (project_id) WHERE (flow_holds AND (lease_owner IS NULL) AND (state = ANY (ARRAY['running'::text, 'waiting'::text, 'sleeping'::text, 'awaiting_confirmation'::text, 'compensating'::text])));

CREATE INDEX runs_flow_open_idx ON automation.runs USING gin (flow_keys) WHERE ((flow_keys IS NOT NULL) AND (state <> ALL (ARRAY['succeeded'::text, 'partial'::text, 'failed'::text, 'compensation_failed'::text, 'cancelled'::text])));

CREATE INDEX runs_flow_parked_at_idx ON automation.runs USING btree (flow_parked_at) WHERE (flow_parked_at IS NOT NULL);

CREATE INDEX runs_flow_parked_idx ON automation.runs USING gin (flow_keys) WHERE (flow_parked_at IS NOT NULL);

CREATE INDEX runs_flow_throttle_idx ON automation.runs USING btree (project_id, flow_throttle) WHERE ((flow_throttle IS NOT NULL) AND (state <> ALL (ARRAY['succeeded'::text, 'partial'::text, 'failed'::text, 'compensation_failed'::text, 'cancelled'::text])));

CREATE INDEX runs_flow_unkeyed_idx ON automation.runs USING btree (created_at) WHERE (flow_keyed = false);

CREATE INDEX runs_leased_idx ON automation.runs USING btree (project_id, queue, workflow_id) WHERE (lease_owner IS NOT NULL);

CREATE INDEX runs_origin_idx ON automation.runs USING btree (origin_run_id) WHERE (origin_run_id IS NOT NULL);

CREATE INDEX runs_partition_idx ON automation.runs USING btree (project_id, queue, partition_key, created_at) WHERE (state <> ALL (ARRAY['succeeded'::text, 'partial'::text, 'failed'::text, 'compensation_failed'::text, 'cancelled'::text]));

CREATE INDEX runs_partition_seq_idx ON automation.runs USING btree (project_id, queue, partition_key, seq) WHERE ((partition_key IS NOT NULL) AND (state <> ALL (ARRAY['succeeded'::text, 'partial'::text, 'failed'::text, 'compensation_failed'::text, 'cancelled'::text])));

CREATE INDEX runs_project_created_idx ON automation.runs USING btree (project_id, created_at DESC);

CREATE INDEX runs_project_error_idx ON automation.runs USING btree (project_id, error_code, created_at DESC, run_id DESC) WHERE (error_code IS NOT NULL);

CREATE INDEX runs_project_partition_key_idx ON automation.runs USING btree (project_id, partition_key) WHERE (partition_key IS NOT NULL);

CREATE INDEX runs_project_state_idx ON automation.runs USING btree (project_id, state, created_at DESC);

CREATE INDEX runs_project_workflow_idx ON automation.runs USING btree (project_id, workflow_id, created_at DESC);

CREATE INDEX runs_queue_waiting_idx ON automation.runs USING btree (project_id, queue, created_at) WHERE (state = 'pending'::text);

CREATE INDEX runs_trigger_active_idx ON automation.runs USING btree (project_id, trigger_id) WHERE ((trigger_id IS NOT NULL) AND (state <> ALL (ARRAY['succeeded'::text, 'partial'::text, 'failed'::text, 'compensation_failed'::text, 'cancelled'::text])));

CREATE INDEX schedule_occurrences_pending_idx ON automation.schedule_occurrences USING btree (project_id, trigger_id, fire_at) WHERE ((status = 'queued'::text) OR ((status = 'started'::text) AND (run_id IS NULL)));

CREATE INDEX schedule_occurrences_trigger_idx ON automation.schedule_occurrences USING btree (project_id, trigger_id, fire_at DESC);

CREATE INDEX step_attempts_open_timers ON ONLY automation.step_attempts USING btree (due_at) WHERE ((status = 'running'::text) AND (due_at IS NOT NULL));

CREATE INDEX step_attempts_default_due_at_idx ON automation.step_attempts_default USING btree (due_at) WHERE ((status = 'running'::text) AND (due_at IS NOT NULL));

CREATE INDEX step_attempts_fired_timers ON ONLY automation.step_attempts USING btree (finished_at) WHERE (due_at IS NOT NULL);

CREATE INDEX step_attempts_default_finished_at_idx ON automation.step_attempts_default USING btree (finished_at) WHERE (due_at IS NOT NULL);

CREATE INDEX step_attempts_project_error_idx ON ONLY automation.step_attempts USING btree (project_id, error_code, started_at) WHERE (error_code IS NOT NULL);

CREATE INDEX step_attempts_default_project_id_error_code_started_at_idx ON automation.step_attempts_default USING btree (project_id, error_code, started_at) WHERE (error_code IS NOT NULL);

CREATE INDEX step_attempts_project_started_idx ON ONLY automation.step_attempts USING btree (project_id, started_at);

CREATE INDEX step_attempts_default_project_id_started_at_idx ON automation.step_attempts_default USING btree (project_id, started_at);

CREATE INDEX step_attempts_project_step_idx ON ONLY automation.step_attempts USING btree (project_id, step_id, started_at);

CREATE INDEX step_attempts_default_project_id_step_id_started_at_idx ON automation.step_attempts_default USING btree (project_id, step_id, started_at);

CREATE INDEX step_attempts_run_started_idx ON ONLY automation.step_attempts USING btree (run_id, started_at);

CREATE INDEX step_attempts_default_run_id_started_at_idx ON automation.step_attempts_default USING btree (run_id, started_at);

CREATE INDEX triggers_event_idx ON automation.triggers USING btree (project_id, event) WHERE (active AND (type = 'event'::text));

CREATE INDEX triggers_type_idx ON automation.triggers USING btree (type) WHERE active;

CREATE INDEX webhook_secrets_trigger_idx ON automation.webhook_secrets USING btree (project_id, trigger_id, created_at DESC);

ALTER INDEX automation.step_attempts_open_timers ATTACH PARTITION automation.step_attempts_default_due_at_idx;

ALTER INDEX automation.step_attempts_fired_timers ATTACH PARTITION automation.step_attempts_default_finished_at_idx;

ALTER INDEX automation.step_attempts_pkey ATTACH PARTITION automation.step_attempts_default_pkey;

ALTER INDEX automation.step_attempts_project_error_idx ATTACH PARTITION automation.step_attempts_default_project_id_error_code_started_at_idx;

ALTER INDEX automation.step_attempts_project_started_idx ATTACH PARTITION automation.step_attempts_default_project_id_started_at_idx;

ALTER INDEX automation.step_attempts_project_step_idx ATTACH PARTITION automation.step_attempts_default_project_id_step_id_started_at_idx;

ALTER INDEX automation.step_attempts_run_started_idx ATTACH PARTITION automation.step_attempts_default_run_id_started_at_idx;

CREATE TRIGGER approval_decisions_append_only BEFORE DELETE OR UPDATE ON automation.approval_decisions FOR EACH ROW EXECUTE FUNCTION automation.approval_decisions_frozen();

CREATE TRIGGER flow_keys_count AFTER INSERT OR DELETE ON automation.flow_keys FOR EACH ROW EXECUTE FUNCTION automation.flow_count_keys();

CREATE TRIGGER run_events_notify AFTER INSERT ON automation.run_events FOR EACH ROW EXECUTE FUNCTION automation.notify_run_event();

CREATE TRIGGER run_partitions_lock_release AFTER INSERT OR UPDATE OF state ON automation.run_partitions FOR EACH ROW EXECUTE FUNCTION automation.partition_lock_release();

CREATE TRIGGER run_signals_wake_any AFTER INSERT ON automation.run_signals FOR EACH ROW EXECUTE FUNCTION automation.run_signals_wake_any();

CREATE TRIGGER runs_children_deliver AFTER UPDATE OF state ON automation.runs FOR EACH ROW WHEN (((old.state IS DISTINCT FROM new.state) AND ((old.state = 'pending'::text) OR (new.state = ANY (ARRAY['succeeded'::text, 'partial'::text, 'failed'::text, 'compensation_failed'::text, 'cancelled'::text]))))) EXECUTE FUNCTION automation.run_children_deliver();

CREATE TRIGGER runs_close_waits AFTER UPDATE OF state ON automation.runs FOR EACH ROW WHEN (((new.state = ANY (ARRAY['succeeded'::text, 'partial'::text, 'failed'::text, 'compensation_failed'::text, 'cancelled'::text])) AND (old.state IS DISTINCT FROM new.state))) EXECUTE FUNCTION automation.run_waits_close();

CREATE TRIGGER runs_due_notify AFTER INSERT OR UPDATE OF next_wake_at, lease_owner ON automation.runs FOR EACH ROW EXECUTE FUNCTION automation.notify_run_due();

CREATE TRIGGER runs_flow_promote AFTER UPDATE OF lease_owner, state ON automation.runs FOR EACH ROW WHEN ((new.flow_keys IS NOT NULL)) EXECUTE FUNCTION automation.flow_promote_parked();

CREATE TRIGGER runs_flow_unkeyed BEFORE INSERT ON automation.runs FOR EACH ROW EXECUTE FUNCTION automation.flow_mark_unkeyed();

CREATE TRIGGER runs_note_grant BEFORE UPDATE OF lease_grants ON automation.runs FOR EACH ROW WHEN ((new.lease_grants IS DISTINCT FROM old.lease_grants)) EXECUTE FUNCTION automation.note_grant();

CREATE TRIGGER runs_partition_locks_release AFTER UPDATE OF state ON automation.runs FOR EACH ROW WHEN (((new.state = ANY (ARRAY['succeeded'::text, 'partial'::text, 'failed'::text, 'compensation_failed'::text, 'cancelled'::text])) AND (old.state <> ALL (ARRAY['succeeded'::text, 'partial'::text, 'failed'::text, 'compensation_failed'::text, 'cancelled'::text])))) EXECUTE FUNCTION automation.partition_locks_of_run_release();

CREATE TRIGGER runs_partition_promote AFTER UPDATE OF state ON automation.runs FOR EACH ROW WHEN (((new.partition_key IS NOT NULL) AND (new.queue IS NOT NULL))) EXECUTE FUNCTION automation.promote_partition_next();

CREATE TRIGGER step_attempts_metrics AFTER INSERT OR UPDATE OF status ON automation.step_attempts FOR EACH ROW EXECUTE FUNCTION automation.metric_attempt_finished();

CREATE TRIGGER workflow_versions_event_wait_programs AFTER INSERT ON automation.workflow_versions FOR EACH ROW EXECUTE FUNCTION automation.event_wait_programs_record();

ALTER TABLE ONLY automation.approval_requests
    ADD CONSTRAINT approval_requests_wait_fkey FOREIGN KEY (run_id, epoch, step_id) REFERENCES automation.run_waits(run_id, epoch, step_id);

ALTER TABLE ONLY automation.flow_buffer_events
    ADD CONSTRAINT flow_buffer_events_buffer_id_fkey FOREIGN KEY (buffer_id) REFERENCES automation.flow_buffers(buffer_id) ON DELETE CASCADE;

ALTER TABLE ONLY automation.partition_items
    ADD CONSTRAINT partition_items_run_id_fkey FOREIGN KEY (run_id) REFERENCES automation.runs(run_id) ON DELETE CASCADE;

ALTER TABLE ONLY automation.partition_plans
    ADD CONSTRAINT partition_plans_run_id_fkey FOREIGN KEY (run_id) REFERENCES automation.runs(run_id) ON DELETE CASCADE;

ALTER TABLE ONLY automation.run_partitions
    ADD CONSTRAINT run_partitions_run_id_fkey FOREIGN KEY (run_id) REFERENCES automation.runs(run_id) ON DELETE CASCADE;

ALTER TABLE ONLY automation.runs
    ADD CONSTRAINT runs_version_fkey FOREIGN KEY (project_id, workflow_id, version) REFERENCES automation.workflow_versions(project_id, workflow_id, version);

ALTER TABLE automation.step_attempts
    ADD CONSTRAINT step_attempts_run_fkey FOREIGN KEY (run_id) REFERENCES automation.runs(run_id) ON DELETE CASCADE;

ALTER TABLE ONLY automation.step_rows
    ADD CONSTRAINT step_rows_run_fkey FOREIGN KEY (run_id) REFERENCES automation.runs(run_id) ON DELETE CASCADE;

ALTER TABLE ONLY automation.webhook_secrets
    ADD CONSTRAINT webhook_secrets_trigger_fkey FOREIGN KEY (project_id, trigger_id) REFERENCES automation.triggers(project_id, trigger_id) ON DELETE CASCADE;
