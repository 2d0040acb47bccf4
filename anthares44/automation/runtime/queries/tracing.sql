-- Tracing (§16, docs/observability.md): the incoming trace context of a run, and what a visit's spans need.

-- name: trace_context_record
-- purpose: keep the traceparent $4 (tracestate $5) sent at $3 with the request for the run keys $2 of project $1, before their runs are created; a key held longer than the idempotency window $6 is taken over
insert into automation.run_trace_context (project_id, run_key, at, traceparent, tracestate)
select $1, k, $3, $4, $5 from unnest($2::text[]) as k
on conflict (project_id, run_key) do update
set at = excluded.at, traceparent = excluded.traceparent, tracestate = excluded.tracestate
where automation.run_trace_context.at < excluded.at - $6::interval;

-- name: trace_context_of_visit
-- purpose: one read per visit when tracing is on: the run's incoming traceparent (sent within the idempotency window $2 before it was created) and when its lease was due and granted
select t.traceparent, t.tracestate, r.grant_due_at, r.granted_at
from automation.runs r
left join automation.run_trace_context t
  on t.project_id = r.project_id and t.run_key = r.idempotency_key
 and t.at <= r.created_at and t.at > r.created_at - $2::interval
where r.run_id = $1;
