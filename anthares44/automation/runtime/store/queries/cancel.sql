-- A person cancels a run (migration 0020, docs/states.md "Cancel"); the worker holding it stops at a safe point.

-- name: run_cancel
-- purpose: record the cancel request of :by for :reason (:compensate, log message :message) on run :run_id of project :project and carry it out when no worker holds the run; returns (outcome, state, prev_state)
select outcome, state, prev_state
from automation.run_cancel(:run_id::text, :project::text, :by::text, :reason::text, :compensate::boolean,
                           :message::text, :now::timestamptz);

-- name: run_cancel_settle
-- purpose: carry out the pending cancel request of run :run_id at :now if no worker holds it any more (a daemon told of a request for a run it does not drive, or that its visit just released), without notifying again; returns (outcome, state, lease_owner)
select outcome, state, lease_owner from automation.run_cancel_settle(:run_id::text, :now::timestamptz, false);

-- name: run_cancel_request
-- purpose: who asked to cancel run :run_id, why, whether to compensate, and the log message: what the worker that stops it writes
select cancelled_by, cancel_reason, cancel_compensate, error_message, cancel_requested_at
from automation.runs
where run_id = :run_id and cancel_requested_at is not null;
