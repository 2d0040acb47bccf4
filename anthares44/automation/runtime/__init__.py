"""The durable runtime: the PostgreSQL store (store.py, queries/, migrations/), where the database is
(database.py, embedded.py), the engine (leases, the interpreter, the daemon), ingestion, queues, schedules and
replay.

Nothing here is imported by the compiler or by `a44 automation lint`; asyncpg is imported by store.py only.
"""
