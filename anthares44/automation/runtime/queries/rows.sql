-- Row counts of steps (migration step_rows, engine/rows.py): written with the attempt that produced them, read back
-- when a worker takes a run over.

-- name: step_rows_record
-- purpose: record (or replace, on a retry or a replay) the row counts step :step_id (partition :partition, '' = the whole step) reported in epoch :epoch
insert into automation.step_rows (run_id, step_id, partition, epoch, rows_in, rows_out, rows_error, recorded_at)
values (:run_id, :step_id, :partition, :epoch, :rows_in, :rows_out, :rows_error, :now)
on conflict (run_id, step_id, partition) do update
set epoch = excluded.epoch, rows_in = excluded.rows_in, rows_out = excluded.rows_out,
    rows_error = excluded.rows_error, recorded_at = excluded.recorded_at;

-- name: step_rows_of_run
-- purpose: the row counts every step of run :run_id recorded, to rebuild its summary on a new visit
select step_id, partition, epoch, rows_in, rows_out, rows_error
from automation.step_rows
where run_id = :run_id
order by step_id, partition;
