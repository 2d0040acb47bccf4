-- 0043_blocked_version: a run of a code workflow whose code, on a claim, asks for a step its history contradicts
-- (E_NONDETERMINISTIC_REPLAY: a deploy changed the steps before its frontier) stops in `blocked_version` instead of
-- failing or being retried (docs/states.md, docs/verify.md). It holds no lease and is never due (next_wake_at
-- null, not claimable: lease_claim picks pending, running, waiting, sleeping and compensating only); its
-- error_code, error_message and failed_step say where code and history part; `runs cancel` ends it (run_cancel:
-- an unheld run is cancelled at once) and `runs migrate` moves it. Additive: nothing but the check changes.
alter table automation.runs drop constraint runs_state_check;
alter table automation.runs add constraint runs_state_check check (state in ('pending', 'running', 'waiting',
    'sleeping', 'awaiting_confirmation', 'compensating', 'blocked_version', 'succeeded', 'partial', 'failed',
    'compensation_failed', 'cancelled'));
