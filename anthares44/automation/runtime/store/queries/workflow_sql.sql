-- The roles and databases of the embedded server's workflow SQL (runtime/postgres/roles.py: the control role;
-- runtime/postgres/projects.py: a role and a database per project), run by the superuser at setup; none of these
-- run on the control store's pool. The wall every workflow database connection passes is the connectors' own query
-- (stdlib_connectors/workflow_db.sql): it runs on the workflow's database, not here.

-- name: role_passwords_set
-- purpose: hand the password of a44 (:control_password) to roles_ensure, for this transaction only
select set_config('a44.control_password', :control_password, true);

-- name: roles_ensure
-- purpose: create or reset the control role a44: a login role without server-level powers
do $$
begin
    if not exists (select from pg_roles where rolname = 'a44') then
        create role a44 login;
    end if;
    execute format('alter role a44 with login nosuperuser nocreatedb nocreaterole noreplication nobypassrls '
                   'password %L', current_setting('a44.control_password'));
    revoke pg_execute_server_program, pg_read_server_files, pg_write_server_files from a44;
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

-- name: control_database_private
-- purpose: only the control role (its owner) and the superuser may connect to the control database a44
revoke connect, temporary on database a44 from public;

-- name: maintenance_databases_private
-- purpose: nobody but the superuser connects to postgres and template1: a project role reaches its own database only
revoke connect, temporary on database postgres, template1 from public;

-- name: project_sql_lock
-- purpose: one provisioning of project roles and databases at a time on this server (session advisory lock)
select pg_advisory_lock(hashtext('a44.project_sql'));

-- name: project_sql_unlock
-- purpose: release project_sql_lock
select pg_advisory_unlock(hashtext('a44.project_sql'));

-- name: project_args_set
-- purpose: hand a project's role (:role), its password (:password) and its database (:database) to the project_* statements of this transaction
select set_config('a44.role', :role, true), set_config('a44.password', :password, true),
       set_config('a44.database', :database, true);

-- name: project_role_restore
-- purpose: create a project's login role, or undo what it did to itself: no powers, memberships or settings, a44's password
do $$
declare
    r text := current_setting('a44.role');
    s record;
begin
    if not exists (select from pg_roles where rolname = r) then
        execute format('create role %I login', r);
    end if;
    execute format('alter role %I with login nosuperuser nocreatedb nocreaterole noreplication nobypassrls inherit '
                   'connection limit -1 valid until %L password %L', r, 'infinity', current_setting('a44.password'));
    -- settings it gave itself (ALTER ROLE ... SET), everywhere
    for s in select d.datname from pg_db_role_setting x left join pg_database d on d.oid = x.setdatabase
             where x.setrole = (select oid from pg_roles where rolname = r) loop
        if s.datname is null then
            execute format('alter role %I reset all', r);
        else
            execute format('alter role %I in database %I reset all', r, s.datname);
        end if;
    end loop;
    -- no role it could act as, and no role that could act as it
    for s in select g.rolname as granted, m.rolname as member, gr.rolname as grantor
             from pg_auth_members a join pg_roles g on g.oid = a.roleid join pg_roles m on m.oid = a.member
                                    join pg_roles gr on gr.oid = a.grantor
             where r in (g.rolname, m.rolname) loop
        execute format('revoke %I from %I granted by %I', s.granted, s.member, s.grantor);
    end loop;
end
$$;

-- name: project_database_exists
-- purpose: whether a project's database (:database) exists
select exists (select from pg_database where datname = :database);

-- name: project_database_create_sql
-- purpose: the statement that creates a project's database (:database), owned by the superuser doing the setup (CREATE DATABASE cannot run in a function)
select format('create database %I', :database::text);

-- name: project_database_restore
-- purpose: a project's database as a44 made it: owned by the setup role, no settings or connection limit, CONNECT and TEMPORARY for its role only
do $$
declare
    d text := current_setting('a44.database');
    r text := current_setting('a44.role');
    g record;
begin
    execute format('alter database %I owner to %I', d, current_user);
    execute format('alter database %I reset all', d);
    execute format('alter database %I with allow_connections true connection limit -1', d);
    for g in select distinct coalesce(x.rolname, 'public') as grantee
             from pg_database db, aclexplode(coalesce(db.datacl, acldefault('d', db.datdba))) a
             left join pg_roles x on x.oid = a.grantee
             where db.datname = d and a.grantee <> db.datdba loop
        execute format('revoke all on database %I from %s', d,
                       case g.grantee when 'public' then 'public' else quote_ident(g.grantee) end);
    end loop;
    execute format('grant connect, temporary on database %I to %I', d, r);
end
$$;

-- name: project_schema_restore
-- purpose: inside a project's database: its role owns the public schema (its tables), and no session of any other role is listed there
do $$
declare
    r text := current_setting('a44.role');
    o record;
begin
    if to_regnamespace('public') is null then
        execute format('create schema public authorization %I', r);
    else
        execute format('alter schema public owner to %I', r);
    end if;
    revoke all on schema public from public;
    -- pg_stat_activity & co. list every session of the server (pid, role, database, application); a role sees the
    -- text of its own statements only, but even the list is another project's business
    for o in select c.oid::regclass as name from pg_class c
             where c.relnamespace = 'pg_catalog'::regnamespace
               and (c.relname in ('pg_stat_activity', 'pg_locks', 'pg_stat_ssl', 'pg_stat_gssapi',
                                  'pg_prepared_xacts', 'pg_stat_database', 'pg_stat_database_conflicts')
                    or c.relname like 'pg\_stat\_progress\_%') loop
        execute format('revoke select on %s from public', o.name);
    end loop;
    for o in select p.oid::regprocedure as name from pg_proc p
             where p.pronamespace = 'pg_catalog'::regnamespace
               and (p.proname in ('pg_stat_get_activity', 'pg_stat_get_backend_idset', 'pg_lock_status',
                                  'pg_blocking_pids', 'pg_safe_snapshot_blocking_pids', 'pg_stat_get_progress_info')
                    or p.proname like 'pg\_stat\_get\_backend\_%' or p.proname like 'pg\_stat\_get\_db\_%') loop
        execute format('revoke execute on function %s from public', o.name);
    end loop;
end
$$;
