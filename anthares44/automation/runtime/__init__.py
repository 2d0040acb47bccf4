"""The durable runtime: the control store (store/: the pool, named queries, migrations), the PostgreSQL servers
(postgres/: the embedded server, the databases, the roles), secrets (secrets/), the engine (leases, the
interpreter, the daemon), ingestion, queues, schedules and replay.

Nothing here is imported by the compiler or by `a44 automation lint`; asyncpg is imported by the store and the
server setup only.
"""
