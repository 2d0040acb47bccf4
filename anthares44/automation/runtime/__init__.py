"""The durable runtime: the PostgreSQL store (store.py, queries/, migrations/), where the database is
(database.py, embedded.py), and, later, leases, the interpreter and the daemon.

Nothing here is imported by the compiler or by `a44 automation lint`; asyncpg is imported by store.py only.
"""
