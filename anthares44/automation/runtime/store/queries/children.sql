-- Child workflows (§21, docs/children.md, migration 0037): the link of a parent's step to its child run, the
-- parent's wait on it, and the lineage of a run (its tree).

-- name: child_of_step
-- purpose: the child run step :step_id of run :run_id (epoch :epoch) started for :kind (action or compensation), if any
select child_run_id, root_run_id, depth, wait, created_at
from automation.run_children
where parent_run_id = :run_id and parent_epoch = :epoch and step_id = :step_id and kind = :kind;

-- name: child_lineage
-- purpose: where run :run_id stands in its tree when it is a child: its parent, root and depth (no row: a root)
select parent_run_id, root_run_id, depth, step_id, kind, on_parent_cancel
from automation.run_children
where child_run_id = :run_id;

-- name: child_wait
-- purpose: the wait of step :step_id of run :run_id (epoch :epoch) on its child: (state, output, timeout_at, key = the child's run id)
select state, output, timeout_at, key
from automation.run_waits
where run_id = :run_id and epoch = :epoch and step_id = :step_id and kind = 'child';

-- name: runs_tree
-- purpose: the tree of run :run_id of project :project: its root and every descendant with state, parent, step, depth and wait mode, in depth then creation order
with recursive top as (
    select coalesce((select c.root_run_id from automation.run_children c where c.child_run_id = :run_id),
                    :run_id::text) as root
), down(run_id, parent_run_id, step_id, kind, depth, wait, on_parent_cancel) as (
    select top.root, null::text, null::text, null::text, 0, null::text, null::text from top
    union all
    select c.child_run_id, c.parent_run_id, c.step_id, c.kind, c.depth, c.wait, c.on_parent_cancel
    from automation.run_children c join down on c.parent_run_id = down.run_id
    where down.depth < 64
)
select d.run_id, d.parent_run_id, d.step_id, d.kind, d.depth, d.wait, d.on_parent_cancel, r.workflow_id,
       r.version, r.state, r.error_code, r.created_at, r.started_at, r.finished_at
from down d
join automation.runs r on r.run_id = d.run_id
where r.project_id = :project
order by d.depth, r.created_at, d.run_id;

-- name: published_workflow_versions
-- purpose: the latest published version of each workflow of project :project: what a child step published later pins
select workflow_id, max(version)::integer as version
from automation.workflow_versions
where project_id = :project
group by workflow_id;

-- name: children_of_root_count
-- purpose: how many child runs the tree of root run :root_run_id has, counted up to :most (the runtime's fan-out limit)
select count(*)::bigint from (
    select 1 from automation.run_children where root_run_id = :root_run_id limit :most
) c;
