-- Row counts of steps (migration 0014, engine/rows.py): written with the attempt that produced them (the
-- `step_rows_record` operation of engine_commit, migration 0019), read back when a worker takes a run over.

-- name: step_rows_of_run
-- purpose: the row counts every step of run :run_id recorded, to rebuild its summary on a new visit
select step_id, partition, epoch, rows_in, rows_out, rows_error
from automation.step_rows
where run_id = :run_id
order by step_id, partition;
