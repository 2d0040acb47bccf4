-- 0024_console_indexes: the console's runs page filters by error code (docs/console.md "Performance"). Without an
-- index that filter reads the whole runs table (1,000,000 runs: 110 ms for the page plus 127 ms for its total,
-- bench/bench_console.py); failed runs are the few with an error code, so a partial index stays small.
create index runs_project_error_idx on automation.runs (project_id, error_code, created_at desc, run_id desc)
    where error_code is not null;
