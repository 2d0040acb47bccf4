-- 0025_published_connectors: declared connector files (`id: con_...`, §14) as published, so that a workflow
-- published later on its own settles `uses: con_...` against them and carries their settings in its IR.
create table automation.connectors (
    project_id   text        not null,
    connector_id text        not null,
    type         text        not null,
    definition   jsonb       not null,
    published_at timestamptz not null,
    updated_at   timestamptz not null,
    constraint connectors_pkey primary key (project_id, connector_id)
);
