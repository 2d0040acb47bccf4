-- 0036_approvals: human approval (§20, docs/approvals.md). An `approval` step is a wait (run_waits, kind
-- 'approval', migration 0033) with a request beside it (approval_requests: who decides, how many, the timers) and
-- an append-only audit of the decisions accepted (approval_decisions). A decision, the timeout and a cancel race
-- on the wait's row: each locks the run's row first and closes the wait only `where state = 'open'`, so exactly one
-- outcome wins. Who decides is read when a person decides, from the published groups (approver_groups). The run's
-- initiator (the name behind the call that created it) is kept in run_initiators. One-click links are signed by a
-- server key (approval_link_keys) and single-use (approval_link_uses).

-- additive to 0033: a wait may be an approval ('event' is migration 0035's, listed so either order merges)
alter table automation.run_waits drop constraint run_waits_kind_check;
alter table automation.run_waits add constraint run_waits_kind_check check (kind in ('signal', 'event', 'any', 'approval'));

create table automation.run_initiators (
    run_id    text not null,
    initiator text not null,                 -- an API token's name, or local:<os user>
    constraint run_initiators_pkey primary key (run_id)
);

create table automation.approver_groups (
    project_id   text        not null,
    name         text        not null,
    members      text[]      not null,
    published_at timestamptz not null,
    constraint approver_groups_pkey primary key (project_id, name)
);

create table automation.approval_requests (
    run_id          text        not null,
    epoch           integer     not null,
    step_id         text        not null,
    project_id      text        not null,
    groups          text[]      not null,
    escalate_groups text[]      not null,
    min_approvals   integer     not null check (min_approvals >= 1),
    allow_self      boolean     not null,
    initiator       text,                    -- the run's, when the request opened
    notify          text,                    -- the channel its messages go to
    opened_at       timestamptz not null,
    timeout_at      timestamptz not null,
    escalate_at     timestamptz,             -- from then on the escalation groups decide too
    remind_at       timestamptz[] not null,
    overdue_at      timestamptz,             -- the first reminder (or the escalation): past it, it is overdue
    constraint approval_requests_pkey primary key (run_id, epoch, step_id),
    constraint approval_requests_wait_fkey foreign key (run_id, epoch, step_id)
        references automation.run_waits (run_id, epoch, step_id)
);
create index approval_requests_project_idx on automation.approval_requests (project_id, opened_at);

create table automation.approval_decisions (
    id         bigint      generated always as identity primary key,
    run_id     text        not null,
    epoch      integer     not null,
    step_id    text        not null,
    person     text        not null,
    decision   text        not null check (decision in ('approve', 'reject')),
    comment    text        check (length(comment) <= 4000),
    via        text        not null check (via in ('cli', 'rest', 'link', 'console')),
    decided_at timestamptz not null,
    constraint approval_decisions_once unique (run_id, epoch, step_id, person)
);

-- The audit is append-only: a decision recorded is never changed or removed.
create function automation.approval_decisions_frozen() returns trigger
    language plpgsql
    as $$
begin
    raise exception 'approval decisions are append-only (% refused)', tg_op;
end
$$;

create trigger approval_decisions_append_only
    before update or delete on automation.approval_decisions
    for each row execute function automation.approval_decisions_frozen();

create table automation.approval_link_keys (
    id         integer     not null check (id = 1),
    key        bytea       not null,
    created_at timestamptz not null,
    constraint approval_link_keys_pkey primary key (id)
);

create table automation.approval_link_uses (
    nonce   text        not null,
    used_at timestamptz not null,
    constraint approval_link_uses_pkey primary key (nonce)
);

-- Open the approval of step p_step (idempotent: a second open returns the first one's row). The run's row is
-- locked first, as a decision locks it.
create function automation.approval_open(p_run text, p_epoch integer, p_step text, p_groups text[],
                                         p_escalate_groups text[], p_min integer, p_allow_self boolean,
                                         p_notify text, p_timeout_at timestamptz, p_escalate_at timestamptz,
                                         p_remind_at timestamptz[], p_now timestamptz)
    returns table (state text, output jsonb, timeout_at timestamptz, opened_at timestamptz)
    language plpgsql
    as $$
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

-- The people who may decide request (p_run, p_epoch, p_step) at p_now: the members of its groups, and of its
-- escalation groups once it escalated, as published now.
create function automation.approval_deciders(p_run text, p_epoch integer, p_step text, p_now timestamptz)
    returns text[]
    language sql
    stable
    as $$
    select coalesce(array_agg(distinct m order by m), '{}')
    from automation.approval_requests q
    join automation.approver_groups g on g.project_id = q.project_id
         and (g.name = any(q.groups) or (q.escalate_at <= p_now and g.name = any(q.escalate_groups)))
    cross join lateral unnest(g.members) m
    where q.run_id = p_run and q.epoch = p_epoch and q.step_id = p_step
$$;

-- A person's decision on the approval of step p_step of run p_run (project p_project), from p_via; p_nonce is a
-- one-click link's, consumed with the decision; p_epoch a link's epoch (null: the run's current one). Outcomes: unknown (no such run in the project), no_request (the
-- step has no approval in the run's epoch), link_used (that link decided before: checked first, so a link is
-- single-use even for its own person), duplicate (this person decided before: their first
-- decision), not_approver, self, closed (the wait is not open, or its timeout passed: closed here timed_out),
-- recorded (counted, not yet enough), approved, rejected.
create function automation.approval_decide(p_project text, p_run text, p_step text, p_person text,
                                           p_decision text, p_comment text, p_via text, p_nonce text,
                                           p_epoch integer, p_now timestamptz)
    returns table (outcome text, state text, decision text, approvals integer, needed integer)
    language plpgsql
    as $$
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
