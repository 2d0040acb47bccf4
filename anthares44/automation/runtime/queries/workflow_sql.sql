-- The databases workflow SQL runs on (sql/execute, stdlib_connectors/sql_database.py) and the application
-- database of the embedded server (runtime/database.py). None of these run on the control store's pool.

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

-- name: app_password_set
-- purpose: hand the application role's password to app_role_ensure for this transaction only
select set_config('a44.app_password', $1, true);

-- name: app_role_ensure
-- purpose: create or reset the application database's login role a44_app: no server-level powers of any kind
do $$
begin
    if not exists (select from pg_roles where rolname = 'a44_app') then
        create role a44_app login;
    end if;
    execute format('alter role a44_app with login nosuperuser nocreatedb nocreaterole noreplication nobypassrls '
                   'password %L', current_setting('a44.app_password'));
    revoke pg_execute_server_program, pg_read_server_files, pg_write_server_files from a44_app;
end
$$;

-- name: app_database_exists
-- purpose: whether the application database a44_app exists
select exists (select from pg_database where datname = 'a44_app');

-- name: app_database_create
-- purpose: the application database, owned by its role (so workflows may create tables in its public schema)
create database a44_app owner a44_app;

-- name: control_database_private
-- purpose: only roles granted it may connect to the control database a44 (not the application role)
revoke connect, temporary on database a44 from public;
