-- What sql/execute asks a workflow's own database (the application database, or a DSN a step names), never the
-- control store: loaded by stdlib_connectors/sql_database.py (format: named_sql.py).

-- name: workflow_db_guard
-- purpose: what a workflow database connection could reach beyond its own tables (checked on every new connection)
select current_user as role,
       current_database() as database,
       r.rolsuper as superuser,
       r.rolcreaterole as createrole,
       r.rolreplication as replication,
       to_regnamespace('automation') is not null as control_schema,
       array(select g from unnest(array['pg_execute_server_program', 'pg_read_server_files',
                                        'pg_write_server_files']) g
             where pg_has_role(current_user, g, 'MEMBER')) as server_roles
from pg_roles r
where r.rolname = current_user;
