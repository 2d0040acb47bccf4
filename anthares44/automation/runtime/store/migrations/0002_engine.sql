-- 0002_engine: what the interpreter daemon needs beyond the log of 0001 (docs/runtime.md).

-- When the next attempt of a step is due after this (failed or timed-out) attempt: set when the interpreter
-- schedules a retry, null when the failure was final. The run's next_wake_at is the minimum over its steps;
-- this column lets a worker that takes the run over see the jittered delay another worker drew.
alter table automation.step_attempts add column retry_at timestamptz;

-- Wake the daemons when a run becomes due without a lease holder (created, released to a retry delay or a
-- sleep, resolved by a person). The payload is the due time in epoch milliseconds, so a daemon can arm a timer
-- for a future due time; lease renewals (lease_owner set) do not notify.
create function automation.notify_run_due()
returns trigger
language plpgsql
as $$
begin
    if new.next_wake_at is not null and new.lease_owner is null
       and (tg_op = 'INSERT' or new.next_wake_at is distinct from old.next_wake_at) then
        perform pg_notify('a44_runs_due', (floor(extract(epoch from new.next_wake_at) * 1000))::bigint::text);
    end if;
    return null;
end
$$;

create trigger runs_due_notify after insert or update of next_wake_at, lease_owner on automation.runs
    for each row execute function automation.notify_run_due();
