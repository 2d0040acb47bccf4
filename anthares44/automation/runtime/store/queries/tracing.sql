-- Tracing (§16, docs/observability.md): the incoming trace context of a run, and what a visit's spans need.

-- name: trace_context_record
-- purpose: keep the traceparent (and tracestate) sent at :now with the request for the run keys :run_keys of project :project, before their runs are created; a key held longer than the idempotency :window is taken over
insert into automation.run_trace_context (project_id, run_key, at, traceparent, tracestate)
select :project, k, :now, :traceparent, :tracestate from unnest(:run_keys::text[]) as k
on conflict (project_id, run_key) do update
set at = excluded.at, traceparent = excluded.traceparent, tracestate = excluded.tracestate
where automation.run_trace_context.at < excluded.at - :window::interval;

-- name: trace_context_of_visit
-- purpose: one read per visit when tracing is on: the run's incoming traceparent (sent within the idempotency :window before it was created) and when its lease was due and granted
select t.traceparent, t.tracestate, r.grant_due_at, r.granted_at
from automation.runs r
left join automation.run_trace_context t
  on t.project_id = r.project_id and t.run_key = r.idempotency_key
 and t.at <= r.created_at and t.at > r.created_at - :window::interval
where r.run_id = :run_id;
