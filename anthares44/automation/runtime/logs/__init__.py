"""Structured logs beyond one run: queries over every attempt of a project (hot rows in PostgreSQL, cold days in
Parquet) and their retention (archive, then drop month partitions)."""
