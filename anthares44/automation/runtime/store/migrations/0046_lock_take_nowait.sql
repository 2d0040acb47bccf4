-- 0046_lock_take_nowait: taking partition locks never waits for a row lock while holding another one
-- (docs/partitions.md "One run per partition", interleavings). A group commit (engine_commit_many) ends the
-- partitions of several runs in one transaction, each release deleting its lock row, in the order of its runs,
-- not of the keys: it could delete day 7's row, then wait for day 6's, while a take of [6, 7] (0031) held day 6's
-- row `for update` and waited for day 7's. PostgreSQL broke the cycle after deadlock_timeout by failing one of
-- them: the take (the visit aborted; the run lay idle until its lease expired) or the commit (one run retried
-- alone). The same cycle between two group commits went through the wait check's `for share`.
--
-- partition_locks_take_v2 goes through its keys sorted and once each (two takes, the only ones that wait for
-- each other, on a concurrent insert of a key, then meet in one order), and reads a holder's row `skip locked`: a
-- row another transaction has locked (a release, a takeover or another run's take of the key in flight) is
-- refused now with the holder it had when last committed, which is what the run would have waited for anyway.
-- Nothing is lost: a run is refused only while it holds its lease, so no release could have woken it; the
-- transaction that releases it to `waiting` checks its keys (engine_op_partition_wait_check_v2 below), and an
-- onConflict: skip refusal names a run that was processing the key when the refusal was read.
-- engine_op_partition_wait_check_v2 reads the lock row `for share skip locked`: a row locked by someone else
-- means the key may free any moment, and the run is made due at once (a spare visit at worst; one that finds the
-- key still held waits again), instead of waiting for that transaction inside a group commit.
-- Additive: partition_locks_take and engine_op_partition_wait_check (0031) stay for the daemons of schema 45.

create function automation.partition_locks_take_v2(p_project text, p_workflow text, p_step text, p_run text,
                                                   p_keys text[], p_wait boolean, p_now timestamptz)
    returns table (partition text, holder text)
    language plpgsql
    as $$
declare
    k text;
    h text;
    live boolean;
    busy boolean;
begin
    foreach k in array (select coalesce(array_agg(distinct x order by x), '{}') from unnest(p_keys) x) loop
        loop
            select l.run_id into h from automation.partition_locks l
            where l.project_id = p_project and l.workflow_id = p_workflow and l.step_id = p_step
              and l.partition = k
            for update skip locked;
            busy := not found;
            if busy then            -- absent, or locked by another transaction: read what it last committed
                select l.run_id into h from automation.partition_locks l
                where l.project_id = p_project and l.workflow_id = p_workflow and l.step_id = p_step
                  and l.partition = k;
                if not found then
                    insert into automation.partition_locks (project_id, workflow_id, step_id, partition, run_id,
                                                            taken_at)
                    values (p_project, p_workflow, p_step, k, p_run, p_now)
                    on conflict do nothing;
                    if found then
                        delete from automation.partition_lock_waiters w
                        where w.project_id = p_project and w.workflow_id = p_workflow and w.step_id = p_step
                          and w.partition = k and w.run_id = p_run;
                        exit;
                    end if;
                    continue;           -- another run inserted it meanwhile: read it again
                end if;
            end if;
            exit when h = p_run;        -- this run's own key (nothing else locks it while the run is leased)
            if not busy then
                select r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')
                into live from automation.runs r where r.run_id = h;
                if not coalesce(live, false) then  -- a stale lock (its run ended without releasing it): take it over
                    update automation.partition_locks l set run_id = p_run, taken_at = p_now
                    where l.project_id = p_project and l.workflow_id = p_workflow and l.step_id = p_step
                      and l.partition = k;
                    exit;
                end if;
            end if;
            if p_wait then              -- held, or busy: refused now, never waited for
                insert into automation.partition_lock_waiters (project_id, workflow_id, step_id, partition, run_id,
                                                               since)
                values (p_project, p_workflow, p_step, k, p_run, p_now)
                on conflict do nothing;
            end if;
            partition := k;
            holder := h;
            return next;
            exit;
        end loop;
    end loop;
end
$$;

-- As engine_op_partition_wait_check (0031), but a lock row another transaction holds makes the run due at once
-- instead of being waited for; one this transaction could lock `for share` stays locked until it commits, so a
-- release that comes later sees this run `waiting` and wakes it itself.
create function automation.engine_op_partition_wait_check_v2(op jsonb) returns void
    language plpgsql
    as $$
declare
    x record;
    w record;
    h text;
    free boolean := false;
begin
    select * into x from jsonb_to_record(op) as r(run_id text, "now" timestamptz);
    for w in select * from automation.partition_lock_waiters v where v.run_id = x.run_id loop
        select l.run_id into h from automation.partition_locks l
        where l.project_id = w.project_id and l.workflow_id = w.workflow_id and l.step_id = w.step_id
          and l.partition = w.partition
        for share skip locked;
        -- not found: the key is free, or its row is locked by a release (or a take) in flight
        if not found or h = x.run_id or not exists (
                select 1 from automation.runs r where r.run_id = h
                  and r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')) then
            free := true;
            exit;
        end if;
    end loop;
    if free then
        update automation.runs set next_wake_at = x."now"
        where run_id = x.run_id and state = 'waiting' and lease_owner is null;
    end if;
end
$$;
