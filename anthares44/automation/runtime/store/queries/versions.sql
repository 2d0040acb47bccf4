-- Published workflow versions (§3.8).

-- name: version_lock
-- purpose: serialise publishes of one workflow (transaction advisory lock on project/workflow)
select pg_advisory_xact_lock(hashtext(:project::text || '/' || :workflow_id::text));

-- name: version_get
-- purpose: one published version of a workflow
select project_id, workflow_id, version, sha256, ir, published_at
from automation.workflow_versions
where project_id = :project and workflow_id = :workflow_id and version = :version;

-- name: version_latest
-- purpose: the highest published version of a workflow
select project_id, workflow_id, version, sha256, ir, published_at
from automation.workflow_versions
where project_id = :project and workflow_id = :workflow_id
order by version desc
limit 1;

-- name: version_insert
-- purpose: store a new version's IR (the caller checked conflict and regression under version_lock)
insert into automation.workflow_versions (project_id, workflow_id, version, sha256, ir, published_at)
values (:project, :workflow_id, :version, :sha256, :ir::jsonb, :now);

-- name: projects_published
-- purpose: every project that has published a workflow (the daemon sets up or restores each one's workflow SQL at start)
select distinct project_id from automation.workflow_versions order by project_id;
