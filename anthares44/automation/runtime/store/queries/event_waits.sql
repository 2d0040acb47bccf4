-- Event waits (§20, docs/waits.md "Event waits", migration 0035): ingestion indexes each event by the
-- correlation programs of the published waits on its type; the engine's look of a wait reads that index.

-- name: event_wait_programs_of_type
-- purpose: the correlation programs (hash, Expr IR; null for a broadcast wait) the published event waits of project :project use on events of type :type
select program_hash, program from automation.event_wait_programs
where project_id = :project and type = :type
order by program_hash;

-- name: event_correlate
-- purpose: record event :event_id (type :type, received :received_at) of project :project under each (program hash, value) of :hashes / :values, each under its value's lock, and wake the runs with an open wait on one; returns how many were made due
select automation.event_correlate(:project::text, :type::text, :event_id::text, :received_at::timestamptz,
                                  :hashes::text[], :values::text[], :now::timestamptz);

-- name: event_wait_lock
-- purpose: take the lock of correlation value :value of program :hash on events of type :type in project :project until commit
select automation.event_wait_lock(:project::text, :type::text, :hash::text, :value::text);

-- name: event_wait_open
-- purpose: open (idempotent) the event wait of step :step_id of run :run_id (epoch :epoch) on type :type and value :value of program :hash, since :since (lookback :lookback_ms), until :timeout_at; returns (state, output, timeout_at, cursor, event_seq, created_at, lookback_ms)
select state, output, timeout_at, cursor, event_seq, created_at, lookback_ms
from automation.event_wait_open(:run_id::text, :epoch::integer, :step_id::text, :project::text, :type::text,
                                :hash::text, :value::text, :since::text, :lookback_ms::bigint,
                                :timeout_at::timestamptz, :now::timestamptz);

-- name: event_wait_candidates
-- purpose: the next :limit events correlated on value :value of program :hash (type :type, project :project) after cursor :cursor, received before :timeout_at, oldest first, with whether the run's `since` admits each and whether another wait of run :run_id (epoch :epoch) took it (watermark :event_seq, lookback from :since_at)
select c.cseq, e.event_id, e.envelope, c.received_at,
       (e.seq > :event_seq::bigint or (:since_at::timestamptz is not null and e.received_at >= :since_at::timestamptz))
           as admitted,
       exists (select 1 from automation.run_waits w
               where w.run_id = :run_id and w.epoch = :epoch and w.satisfied_by = 'event:' || e.event_id) as taken
from automation.event_correlations c
join automation.events e on e.event_id = c.event_id
where c.project_id = :project and c.type = :type and c.program_hash = :hash and c.value = :value
  and c.cseq > :cursor and c.received_at < :timeout_at
order by c.cseq
limit :limit;

-- name: event_wait_settle
-- purpose: move the cursor of the event wait of step :step_id of run :run_id (epoch :epoch) to :cursor, add :before skipped and :errors failed candidates, and satisfy it with event :event_id (:envelope) if given, unless it closed first; returns (state, output, timeout_at)
select state, output, timeout_at
from automation.event_wait_settle(:run_id::text, :epoch::integer, :step_id::text, :cursor::bigint,
                                  :before::integer, :errors::integer, :event_id::text, :envelope::jsonb,
                                  :now::timestamptz);

-- name: event_waits_of_run
-- purpose: what each event wait of run :run_id correlates on and how far it read: what `runs show` says
select step_id, epoch, type, value, lookback_ms, cursor, before_since, cel_errors
from automation.run_event_waits
where run_id = :run_id
order by epoch, step_id;

-- name: event_waits_open_of_runs
-- purpose: the correlation value of each open event wait of the runs :run_ids: what `runs` says a waiting run waits on
select e.run_id, e.step_id, e.value
from automation.run_event_waits e
join automation.run_waits w using (run_id, epoch, step_id)
where e.run_id = any(:run_ids::text[]) and w.state = 'open';

-- name: any_wait_open
-- purpose: open (idempotent) the `any` wait of step :step_id of run :run_id (epoch :epoch, project :project) with its event branches :events and signal branches :signals (JSON), until :timeout_at; returns (state, output, timeout_at, opened_at, event_seq, created_at)
select state, output, timeout_at, opened_at, event_seq, created_at
from automation.any_wait_open(:run_id::text, :epoch::integer, :step_id::text, :project::text, :events::jsonb,
                              :signals::jsonb, :timeout_at::timestamptz, :now::timestamptz);

-- name: any_wait_branch
-- purpose: the cursor and lookback of event branch :branch of the `any` wait of step :step_id of run :run_id (epoch :epoch)
select cursor, lookback_ms from automation.run_event_waits
where run_id = :run_id and epoch = :epoch and step_id = :step_id and branch = :branch;

-- name: any_wait_advance
-- purpose: move the cursor of event branch :branch of the `any` wait of step :step_id of run :run_id (epoch :epoch) to :cursor, adding :before skipped and :errors failed candidates
update automation.run_event_waits
set cursor = greatest(cursor, :cursor::bigint), before_since = before_since + :before::integer,
    cel_errors = cel_errors + :errors::integer
where run_id = :run_id and epoch = :epoch and step_id = :step_id and branch = :branch;

-- name: any_wait_lock_run
-- purpose: lock the row of run :run_id until commit, as run_signal does: a signal being sent commits before the `any` wait's look (and is seen) or after it (and wakes the run)
select 1 from automation.runs where run_id = :run_id for update;

-- name: any_wait_signal_peek
-- purpose: the oldest unconsumed signal named :name sent to run :run_id (seq, data, received_at)
select seq, data, received_at from automation.run_signals
where run_id = :run_id and name = :name and consumed_at is null
order by seq limit 1;

-- name: any_wait_close
-- purpose: close the `any` wait of step :step_id of run :run_id (epoch :epoch) with :output (satisfied by :satisfied_by; consuming signal :signal_seq if given) at :now unless it closed first; returns (state, output, timeout_at)
select state, output, timeout_at
from automation.any_wait_close(:run_id::text, :epoch::integer, :step_id::text, :satisfied_by::text,
                               :output::jsonb, :signal_seq::bigint, :now::timestamptz);
