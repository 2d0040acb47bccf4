-- What a project has published, for `publish` to settle a file's references against (docs/lint.md).

-- name: published_queue_ids
-- purpose: the ids of a project's published queue files
select queue_id from automation.queues where project_id = :project order by queue_id;

-- name: published_workflow_ids
-- purpose: the ids of a project's published workflows (any version)
select distinct workflow_id from automation.workflow_versions where project_id = :project order by workflow_id;

-- name: published_connectors
-- purpose: a project's published declared connectors with their definitions (as written, validated)
select connector_id, definition from automation.connectors where project_id = :project order by connector_id;

-- name: connector_upsert
-- purpose: store a published declared connector (replacing its previous definition); returns whether it was created, updated or unchanged
with old as (
    select definition from automation.connectors where project_id = :project and connector_id = :connector_id
), up as (
    insert into automation.connectors as c (project_id, connector_id, type, definition, published_at, updated_at)
    values (:project, :connector_id, :type, :definition::jsonb, :now, :now)
    on conflict (project_id, connector_id) do update
        set type = excluded.type, definition = excluded.definition, updated_at = excluded.updated_at
        where c.definition is distinct from excluded.definition
    returning connector_id
)
select case when not exists (select 1 from old) then 'created'
            when exists (select 1 from up) then 'updated' else 'unchanged' end;

-- name: published_connector_types
-- purpose: the connector types (`http`, `sql/execute`, a declared connector's type...) that any published workflow version's steps or compensations use, read once by a daemon's warm-up: it makes what a connector makes on first use only for the types some workflow calls
select distinct t #>> '{}' as type
from automation.workflow_versions w,
     jsonb_path_query(w.ir, 'lax $.**.connector.type') t
where jsonb_typeof(t) = 'string';
