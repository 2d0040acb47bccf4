-- 0017_log_queries: what `logs query` and log retention need (docs/observability.md "Log queries").
-- The query walks attempts newest first within a project and a time range; an error code or a step narrows it,
-- a workflow or a partition key goes through the run. Each filter has an index that starts with it, so a
-- query reads the rows it returns (plus one), not the month.
create index step_attempts_project_started_idx on automation.step_attempts (project_id, started_at);
create index step_attempts_project_error_idx on automation.step_attempts (project_id, error_code, started_at)
    where error_code is not null;
create index runs_project_partition_key_idx on automation.runs (project_id, partition_key)
    where partition_key is not null;
-- the attempts of a few runs (a partition key's, a workflow's recent ones) within the time range: the primary key
-- starts with run_id too, but its started_at comes last, so the planner prices a range on it as a scan of every
-- attempt of the run and hashes the whole month instead (65 ms against 0.3 ms at 1,000,000 attempts); `logs RUN`
-- (attempts_list: one run in start order) reads this index as well
create index step_attempts_run_started_idx on automation.step_attempts (run_id, started_at);

-- One row per UTC day of attempts written to the cold store (Parquet): the day's file holds exactly `rows`
-- rows. A month partition is dropped only once every day of it is here with the partition's own count, so a
-- crash between writing a file and recording it costs a rewrite of that day, never a lost or doubled row.
create table automation.log_archive_days (
    day         date        not null,
    rows        bigint      not null check (rows >= 0),
    path        text        not null,
    archived_at timestamptz not null,
    constraint log_archive_days_pkey primary key (day)
);

-- Retention deletes runs that ended before the oldest attempt month still in PostgreSQL, oldest first, in batches.
create index runs_finished_idx on automation.runs (finished_at) where finished_at is not null;

-- Detach and drop one month partition of step_attempts (its bounds [p_lo, p_hi), from its name), only when the
-- archive holds as many rows for its days as the partition has (a past month gets no new rows: attempts start
-- now). Returns the rows dropped, or null when `p_name` is not a partition of step_attempts or the archive is
-- short. A short lock_timeout: retention waits for the next round rather than queueing the log's writers.
create function automation.drop_archived_attempt_month(p_name text, p_lo timestamptz, p_hi timestamptz)
returns bigint
language plpgsql
as $$
declare
    hot bigint;
    cold bigint;
begin
    if not exists (select 1 from pg_inherits i join pg_class c on c.oid = i.inhrelid
                   join pg_namespace n on n.oid = c.relnamespace
                   where i.inhparent = 'automation.step_attempts'::regclass and n.nspname = 'automation'
                     and c.relname = p_name and p_name <> 'step_attempts_default') then
        return null;
    end if;
    execute format('select count(*) from automation.%I', p_name) into hot;
    select coalesce(sum(rows), 0) into cold from automation.log_archive_days
    where day >= (p_lo at time zone 'UTC')::date and day < (p_hi at time zone 'UTC')::date;
    if hot <> cold then
        return null;
    end if;
    perform set_config('lock_timeout', '5s', true);
    execute format('alter table automation.step_attempts detach partition automation.%I', p_name);
    execute format('drop table automation.%I', p_name);
    return hot;
end
$$;
