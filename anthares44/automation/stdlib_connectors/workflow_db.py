"""The named SQL this connector runs on a workflow's own database (workflow_db.sql): the wall's checks
(sql_database.py) and a statement's session reset (sql_session.py). They run there, not on the control store,
so they live with the connector, not with runtime/store/queries."""

from __future__ import annotations

from pathlib import Path

from ..named_sql import load_file

QUERIES = load_file(Path(__file__).with_name("workflow_db.sql"))
