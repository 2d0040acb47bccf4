-- Human approval (§20, docs/approvals.md, migration 0036): the engine opens an approval step's request; a person
-- decides; publish stores the approver groups; a run records who started it.

-- name: approval_open
-- purpose: open the approval of step :step_id of run :run_id (epoch :epoch) until :timeout_at (idempotent), with its groups, min, timers and channel; returns (state, output, timeout_at, opened_at)
select state, output, timeout_at, opened_at
from automation.approval_open(:run_id::text, :epoch::integer, :step_id::text, :groups::text[],
                              :escalate_groups::text[], :min::integer, :allow_self::boolean, :notify::text,
                              :timeout_at::timestamptz, :escalate_at::timestamptz, :remind_at::timestamptz[],
                              :now::timestamptz);

-- name: approval_decide
-- purpose: :person decides :decision (approve | reject, :comment, from :via, with link nonce :nonce of epoch :epoch) on the approval of step :step_id of run :run_id in project :project at :now; returns (outcome, state, decision, approvals, needed)
select outcome, state, decision, approvals, needed
from automation.approval_decide(:project::text, :run_id::text, :step_id::text, :person::text, :decision::text,
                                :comment::text, :via::text, :nonce::text, :epoch::integer, :now::timestamptz);

-- name: approval_deciders
-- purpose: who may decide the approval of step :step_id of run :run_id (epoch :epoch) at :now, as published now
select automation.approval_deciders(:run_id::text, :epoch::integer, :step_id::text, :now::timestamptz);

-- name: approval_request_self
-- purpose: who started the run when the approval of step :step_id of run :run_id (epoch :epoch) opened, and whether the step lets them approve it
select initiator, allow_self from automation.approval_requests
where run_id = :run_id and epoch = :epoch and step_id = :step_id;

-- name: approval_decisions_of
-- purpose: the audit of the approval of step :step_id of run :run_id (epoch :epoch), oldest first
select id, person, decision, comment, via, decided_at
from automation.approval_decisions
where run_id = :run_id and epoch = :epoch and step_id = :step_id
order by id;

-- name: approval_requests_of_run
-- purpose: the approval requests of run :run_id (every epoch) with their wait's state, who may decide at :now and the decisions so far, oldest first: `runs show`
select q.epoch, q.step_id, w.state, q.groups, q.escalate_groups, q.min_approvals, q.allow_self, q.initiator,
       q.opened_at, q.timeout_at, q.escalate_at, q.remind_at, q.overdue_at,
       automation.approval_deciders(q.run_id, q.epoch, q.step_id, :now::timestamptz) as deciders,
       coalesce((select jsonb_agg(jsonb_build_object('person', d.person, 'decision', d.decision, 'at', d.decided_at,
                                                     'comment', d.comment, 'via', d.via) order by d.id)
                 from automation.approval_decisions d
                 where d.run_id = q.run_id and d.epoch = q.epoch and d.step_id = q.step_id), '[]') as decisions
from automation.approval_requests q
join automation.run_waits w using (run_id, epoch, step_id)
where q.run_id = :run_id
order by q.opened_at, q.step_id;

-- name: approvals_open
-- purpose: the open approvals of project :project at :now (only those :person may decide when given; only those past their overdue instant when :overdue), oldest first, at most :limit
select * from (
    select q.run_id, r.workflow_id, q.step_id, q.min_approvals, q.opened_at, q.timeout_at, q.overdue_at,
           q.initiator, automation.approval_deciders(q.run_id, q.epoch, q.step_id, :now::timestamptz) as deciders,
           (select count(*) from automation.approval_decisions d
            where d.run_id = q.run_id and d.epoch = q.epoch and d.step_id = q.step_id
              and d.decision = 'approve')::integer as approvals,
           coalesce((select array_agg(d.person order by d.id) from automation.approval_decisions d
                     where d.run_id = q.run_id and d.epoch = q.epoch and d.step_id = q.step_id), '{}') as decided
    from automation.approval_requests q
    join automation.run_waits w using (run_id, epoch, step_id)
    join automation.runs r on r.run_id = q.run_id and r.epoch = q.epoch
    where q.project_id = :project and w.state = 'open'
      and (not :overdue::boolean or q.overdue_at <= :now::timestamptz)
) a
where :person::text is null or (:person = any(a.deciders) and not :person = any(a.decided))
order by a.opened_at, a.run_id, a.step_id
limit :limit;

-- name: approvals_overdue_counts
-- purpose: open approvals past their overdue instant at :now, per project: the metric automation_approvals_overdue behind the built-in alert
select q.project_id, count(*)::bigint as overdue
from automation.approval_requests q
join automation.run_waits w using (run_id, epoch, step_id)
where w.state = 'open' and q.overdue_at <= :now::timestamptz
group by q.project_id
order by q.project_id;

-- name: approver_groups_store
-- purpose: publish approver group :name of project :project with :members at :now; returns created | updated | unchanged
with old as (
    select members from automation.approver_groups where project_id = :project and name = :name
), up as (
    insert into automation.approver_groups (project_id, name, members, published_at)
    values (:project, :name, :members::text[], :now)
    on conflict on constraint approver_groups_pkey do update
        set members = excluded.members, published_at = excluded.published_at
        where automation.approver_groups.members is distinct from excluded.members
    returning 1
)
select case when not exists (select 1 from old) then 'created'
            when exists (select 1 from up) then 'updated'
            else 'unchanged' end as outcome;

-- name: approver_groups_of_project
-- purpose: the approver groups of project :project with their members, by name
select name, members, published_at from automation.approver_groups where project_id = :project order by name;

-- name: approval_link_key
-- purpose: the server's key of one-click approval links, made from :key on first use (at :now); returns the key
with made as (
    insert into automation.approval_link_keys (id, key, created_at) values (1, :key::bytea, :now)
    on conflict on constraint approval_link_keys_pkey do nothing
    returning key
)
select key from made union all select key from automation.approval_link_keys where id = 1 limit 1;

-- name: run_create_initiated
-- purpose: run_create, recording :initiator as the name behind the call that started the run, in the same statement (the approval's initiator, E_SELF_APPROVAL)
with
-- include: run_create_target
,
-- include: run_create_rows
, who as (
    insert into automation.run_initiators (run_id, initiator) select run_id, :initiator from run
)
select (select version from target) as version, (select run_id from run) as created_run_id;
