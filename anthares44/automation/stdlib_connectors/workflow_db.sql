-- What sql/execute asks a workflow's own database (a project's application database, or a DSN a step names), never
-- the control store: loaded by stdlib_connectors/sql_database.py (format: named_sql.py).

-- name: workflow_db_guard
-- purpose: what a workflow database connection could reach beyond its own tables (checked on every new connection)
select current_user as role,
       current_database() as database,
       r.rolsuper as superuser,
       r.rolcreaterole as createrole,
       r.rolreplication as replication,
       to_regnamespace('automation') is not null as control_schema,
       -- the daemon's own role (:control_role, from the control store's URL), on whatever database the URL names
       current_user = :control_role as control_role,
       exists (select from pg_roles c where c.rolname = :control_role
               and pg_has_role(current_user, c.oid, 'MEMBER')) as control_member,
       -- shell commands and files on the database host
       array(select g from unnest(array['pg_execute_server_program', 'pg_read_server_files',
                                        'pg_write_server_files']) g
             where pg_has_role(current_user, g, 'MEMBER')) as server_roles,
       -- other sessions' statements (the daemon's included), or signalling them
       array(select g from unnest(array['pg_read_all_stats', 'pg_monitor', 'pg_signal_backend']) g
             where pg_has_role(current_user, g, 'MEMBER')) as session_roles
from pg_roles r
where r.rolname = current_user;

-- name: project_db_isolation
-- purpose: what a project's application database role could reach of other projects (checked on its new connections)
select r.rolcreatedb as createdb,
       array(select d.datname from pg_database d where d.datdba = r.oid order by 1) as owns,
       array(select g.rolname from pg_auth_members m join pg_roles g on g.oid = m.roleid
             where m.member = r.oid order by 1) as member_of,
       -- other projects' databases (:others) and the control database (:control_database) on this server
       array(select d.datname from pg_database d
             where d.datname <> current_database() and d.datallowconn
               and (d.datname = any(:others::text[]) or d.datname = :control_database)
               and has_database_privilege(r.oid, d.oid, 'CONNECT') order by 1) as connects_to
from pg_roles r
where r.rolname = current_user;

-- fragment: workflow_session_undo
-- purpose: undo what a workflow statement did to its pooled session (sql_session.py): settings first, so that the
-- rest resolves pg_catalog first whatever search_path the statement set
set session authorization default;
reset all;
select pg_catalog.pg_advisory_unlock_all();
close all;
unlisten *;
discard temp;
discard sequences;
do $a44$
declare s record;
begin
    for s in select name from pg_catalog.pg_prepared_statements where from_sql loop
        execute 'deallocate ' operator(pg_catalog.||) pg_catalog.quote_ident(s.name);
    end loop;
end
$a44$;

-- name: workflow_session_reset
-- purpose: the session reset on its own (the statement ran outside our transaction, or was cut off)
-- include: workflow_session_undo

-- name: workflow_session_reset_commit
-- purpose: the session reset inside the statement's transaction, and its commit: one commit per step
-- include: workflow_session_undo
commit;

-- name: workflow_session_rollback_reset
-- purpose: end the failed statement's transaction, then reset the session (advisory locks, PREPARE survive a rollback)
rollback;
-- include: workflow_session_undo

-- name: workflow_session_rollback
-- purpose: end a transaction whose statement was refused before it ran (a stale plan, 25001)
rollback;
