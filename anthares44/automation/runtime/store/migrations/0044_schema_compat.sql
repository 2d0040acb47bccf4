-- 0044_schema_compat: what each migration asks of the daemons still running, so that two releases may serve one
-- database during a deploy (docs/store.md "Rolling upgrades").
--
-- From this migration on a migration is additive (new tables, columns, functions under a new name or signature:
-- `lease_claim_v2`; the old function stays for the daemons still calling it) unless its header says
--     -- destructive: drops automation.lease_claim(text, ...); needs daemons >= schema 47
-- (tests/test_migration_convention.py enforces it). The runner records a row here for each migration it applies:
-- the lowest daemon schema that may still run once it is applied (the daemon's schema is the number of the newest
-- migration it ships). An additive migration carries the previous value forward; a destructive one raises it to its
-- mark. A daemon refuses to start when the database asks for a newer daemon than itself (E_DB_SCHEMA_RANGE), and
-- `serve` never applies a destructive migration itself (`a44 automation db migrate` does, once the old daemons are
-- gone).
--
-- The baseline row (number 0): schema 42 (the release this one follows, commit 5f787a0) is the oldest daemon tested
-- against this schema (tests/rolling/test_mixed_versions.py); older releases redefined functions in place.

create table automation.schema_compat (
    number            integer not null primary key,   -- the migration (0: the baseline before any row)
    name              text    not null,
    min_daemon_schema integer not null,                -- daemons of an older schema may not run once it is applied
    destructive       text                             -- what its destructive mark says it removes, else null
);

insert into automation.schema_compat (number, name, min_daemon_schema, destructive)
values (0, 'baseline', 42, null);
