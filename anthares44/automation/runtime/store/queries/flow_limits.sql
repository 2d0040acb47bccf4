-- Flow limits (§22, docs/flow.md): computing a run's keys before its admission, sweeping idle keys, explaining
-- what holds a run back. The admission itself is lease_claim (leases.sql, migration 0039).

-- name: flow_unkeyed
-- purpose: runs whose flow keys are still to compute (runs_flow_unkeyed_idx), oldest first, at most :limit
select run_id, project_id, workflow_id, version, input
from automation.runs
where flow_keyed = false and state = 'pending'
order by created_at
limit :limit;

-- name: flow_key_run
-- purpose: write one run's computed keys at :now (:doc), or skip / dead-letter it, in one transaction with its row locked (automation.flow_key_run, 0039); refuses a new key past :max_keys live keys of its limit
select automation.flow_key_run(:now, :doc::jsonb, :max_keys);

-- name: flow_keys_sweep
-- purpose: delete at most :limit keys idle since :now - :idle (or their window) that no unfinished run names
select automation.flow_keys_sweep(:now, :idle, :limit);
