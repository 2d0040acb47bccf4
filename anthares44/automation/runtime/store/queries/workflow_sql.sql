-- The roles and the application database of the embedded server (runtime/postgres/roles.py), made by the superuser at
-- setup; none of these run on the control store's pool. The wall every workflow database connection passes is the
-- connectors' own query (stdlib_connectors/workflow_db.sql): it runs on the workflow's database, not here.

-- name: role_passwords_set
-- purpose: hand the passwords of a44 (:control_password) and a44_app (:app_password) to roles_ensure, for this transaction only
select set_config('a44.control_password', :control_password, true), set_config('a44.app_password', :app_password, true);

-- name: roles_ensure
-- purpose: create or reset the login roles a44 (control store) and a44_app (workflow SQL): no server-level powers
do $$
declare
    r record;
begin
    for r in select * from (values ('a44', 'a44.control_password'), ('a44_app', 'a44.app_password')) v(role, pw) loop
        if not exists (select from pg_roles where rolname = r.role) then
            execute format('create role %I login', r.role);
        end if;
        execute format('alter role %I with login nosuperuser nocreatedb nocreaterole noreplication nobypassrls '
                       'password %L', r.role, current_setting(r.pw));
        execute format('revoke pg_execute_server_program, pg_read_server_files, pg_write_server_files from %I',
                       r.role);
    end loop;
end
$$;

-- name: control_database_owner
-- purpose: the control role owns the control database (it creates the automation schema there)
alter database a44 owner to a44;

-- name: control_schema_owner
-- purpose: hand the automation schema and its objects made by the superuser (an older a44) to the control role
do $$
declare
    r record;
begin
    if to_regnamespace('automation') is null then
        return;
    end if;
    alter schema automation owner to a44;
    -- sequences of serial/identity columns follow their table
    for r in select c.oid::regclass as name, c.relkind from pg_class c
             where c.relnamespace = 'automation'::regnamespace and c.relkind in ('r', 'p', 'v', 'm', 'S')
               and c.relowner <> 'a44'::regrole
               and not (c.relkind = 'S' and exists (select from pg_depend d where d.classid = 'pg_class'::regclass
                                                    and d.objid = c.oid and d.deptype in ('a', 'i'))) loop
        execute format('alter %s %s owner to a44',
                       case r.relkind when 'S' then 'sequence' when 'v' then 'view'
                                      when 'm' then 'materialized view' else 'table' end, r.name);
    end loop;
    for r in select p.oid::regprocedure as name from pg_proc p
             where p.pronamespace = 'automation'::regnamespace and p.proowner <> 'a44'::regrole loop
        execute format('alter routine %s owner to a44', r.name);
    end loop;
end
$$;

-- name: app_database_exists
-- purpose: whether the application database a44_app exists
select exists (select from pg_database where datname = 'a44_app');

-- name: app_database_create
-- purpose: the application database, owned by its role (so workflows may create tables in its public schema)
create database a44_app owner a44_app;

-- name: control_database_private
-- purpose: only the control role (its owner) and the superuser may connect to the control database a44
revoke connect, temporary on database a44 from public;
