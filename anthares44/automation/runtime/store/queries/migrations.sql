-- Queries of the migration runner (migrations.py) and of partition upkeep.

-- name: migration_lock
-- purpose: transaction advisory lock so that only one process applies a migration at a time (a transaction
-- lock: through a transaction pooler a session lock would stay behind on a server backend; it conflicts with the
-- session lock of the same key that older a44 versions take)
select pg_advisory_xact_lock(hashtext('a44.automation.migrate'));

-- name: migration_is_applied
-- purpose: whether a migration is recorded (read again under the lock: another process may just have applied it)
select exists (select 1 from automation.schema_migrations where number = :number);

-- name: migration_bootstrap
-- purpose: create the schema and the table that records applied migrations, if missing
create schema if not exists automation;
create table if not exists automation.schema_migrations (
    number     integer     not null primary key,
    name       text        not null,
    sha256     text        not null,
    applied_at timestamptz not null
);

-- name: migration_applied
-- purpose: the migrations already applied, in order
select number, name, sha256, applied_at from automation.schema_migrations order by number;

-- name: migration_record
-- purpose: remember that a migration was applied (same transaction as the migration)
insert into automation.schema_migrations (number, name, sha256, applied_at) values (:number, :name, :sha256, :now);

-- name: partitions_ensure
-- purpose: create the step_attempts monthly partitions from the month of :now to :months_ahead months ahead
select automation.ensure_step_attempt_partitions(:now::timestamptz, :months_ahead::integer);

-- name: partitions_list
-- purpose: the partitions of step_attempts with their bounds, for status output and tests
select c.relname as name, pg_get_expr(c.relpartbound, c.oid) as bound
from pg_inherits i
join pg_class c on c.oid = i.inhrelid
where i.inhparent = 'automation.step_attempts'::regclass
order by c.relname;

-- name: server_version
-- purpose: the server's version number (e.g. 180006), to refuse PostgreSQL older than 14
select current_setting('server_version_num')::integer;

-- name: schema_compat_ready
-- purpose: whether the table of what migrations ask of running daemons exists yet (0044 creates it)
select to_regclass('automation.schema_compat') is not null;

-- name: schema_compat_record
-- purpose: the lowest daemon schema that may run once migration :number is applied: the previous one carried
--          forward, raised to :min_daemon by a destructive migration (same transaction as the migration)
insert into automation.schema_compat (number, name, min_daemon_schema, destructive)
select :number::integer, :name::text, greatest(coalesce(max(c.min_daemon_schema), 0), :min_daemon::integer),
       :destructive::text
from automation.schema_compat c;

-- name: schema_compat_need
-- purpose: the migration that asks for the newest daemon (the database's lower bound on a daemon's schema)
select number, name, min_daemon_schema, destructive from automation.schema_compat
order by min_daemon_schema desc, number limit 1;
