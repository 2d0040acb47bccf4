-- 0031_partition_locks: a (workflow, step, partition key) is processed by one run at a time, whatever the source of
-- the keys (a `from`/`to` range, a `foreach` list, `since: lastSuccess`): docs/partitions.md "One run per partition".
-- A run takes a partition's lock before its first attempt (partition_locks_take, its own statement: the run then
-- owns the key until the partition ends); another run that wants the key gets the holder back and either waits
-- (registered in partition_lock_waiters, released to `waiting`: no worker held) or, with `onConflict: skip`,
-- records the partition skipped with the holder's id. The lock is released in the transaction that ends the
-- partition (success, skipped, failed or timed out for good: the run_partitions trigger below) or that ends the
-- run (cancelled, failed, compensated...: the runs trigger), which wakes the waiters of the key at that instant.
-- A lock whose holder has finished is stale and is taken over at once; the lock belongs to the run, not to a
-- daemon: when the holder's daemon dies, its lease expires and the daemon that takes the run over continues it
-- with its locks (its interrupted call may still be running on the far side: nobody else may start the key).
create table automation.partition_locks (
    project_id  text        not null,
    workflow_id text        not null,
    step_id     text        not null,
    partition   text        not null,
    run_id      text        not null,
    taken_at    timestamptz not null,
    constraint partition_locks_pkey primary key (project_id, workflow_id, step_id, partition)
);
create index partition_locks_run_idx on automation.partition_locks (run_id);

create table automation.partition_lock_waiters (
    project_id  text        not null,
    workflow_id text        not null,
    step_id     text        not null,
    partition   text        not null,
    run_id      text        not null,
    since       timestamptz not null,
    constraint partition_lock_waiters_pkey primary key (project_id, workflow_id, step_id, partition, run_id)
);
create index partition_lock_waiters_run_idx on automation.partition_lock_waiters (run_id);

-- Take the locks of `p_keys` for run `p_run`: one row per key another unfinished run holds (its id); the others
-- are this run's now. With `p_wait` the run is registered to be woken when a refused key frees. The holder's row is
-- locked while it is read, so a release committing meanwhile is seen (the key is taken) or sees the waiter.
create function automation.partition_locks_take(p_project text, p_workflow text, p_step text, p_run text,
                                                p_keys text[], p_wait boolean, p_now timestamptz)
    returns table (partition text, holder text)
    language plpgsql
    as $$
declare
    k text;
    h text;
    live boolean;
begin
    foreach k in array p_keys loop
        loop
            select l.run_id into h from automation.partition_locks l
            where l.project_id = p_project and l.workflow_id = p_workflow and l.step_id = p_step
              and l.partition = k
            for update;
            if not found then
                insert into automation.partition_locks (project_id, workflow_id, step_id, partition, run_id, taken_at)
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
            exit when h = p_run;
            select r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled') into live
            from automation.runs r where r.run_id = h;
            if not coalesce(live, false) then      -- a stale lock (its run ended without releasing it): take it over
                update automation.partition_locks l set run_id = p_run, taken_at = p_now
                where l.project_id = p_project and l.workflow_id = p_workflow and l.step_id = p_step
                  and l.partition = k;
                exit;
            end if;
            if p_wait then
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

-- Wake the runs waiting for a key that was just released: those released to `waiting` are due now and stop
-- waiting for it. A waiter still leased (it was refused the key in the visit that is about to release it) keeps its
-- row: the wait check of its release (engine_op_partition_wait_check) finds the key free and makes it due.
create function automation.partition_lock_wake(p_project text, p_workflow text, p_step text, p_partition text,
                                               p_now timestamptz)
    returns void
    language plpgsql
    as $$
declare
    woke integer;
begin
    with w as (
        update automation.runs r set next_wake_at = least(r.next_wake_at, p_now)
        from automation.partition_lock_waiters v
        where v.project_id = p_project and v.workflow_id = p_workflow and v.step_id = p_step
          and v.partition = p_partition and r.run_id = v.run_id and r.state = 'waiting' and r.lease_owner is null
        returning r.run_id
    )
    delete from automation.partition_lock_waiters v using w
    where v.project_id = p_project and v.workflow_id = p_workflow and v.step_id = p_step
      and v.partition = p_partition and v.run_id = w.run_id;
    get diagnostics woke = row_count;
    if woke > 0 then
        perform pg_notify('a44_runs_due', (floor(extract(epoch from p_now) * 1000))::bigint::text);
    end if;
end
$$;

-- A partition that ended (for good, until a replay takes it again) releases its lock in the same transaction.
create function automation.partition_lock_release()
    returns trigger
    language plpgsql
    as $$
begin
    if new.state in ('success', 'skipped', 'failed', 'timeout') then
        delete from automation.partition_locks l
        where l.project_id = new.project_id and l.workflow_id = new.workflow_id and l.step_id = new.step_id
          and l.partition = new.partition and l.run_id = new.run_id;
        if found then
            perform automation.partition_lock_wake(new.project_id, new.workflow_id, new.step_id, new.partition,
                                                   new.updated_at);
        end if;
    end if;
    return null;
end
$$;

create trigger run_partitions_lock_release after insert or update of state on automation.run_partitions
    for each row execute function automation.partition_lock_release();

-- A run that ends (cancelled, failed, compensated, partial, succeeded) releases every lock it still holds and
-- stops waiting.
create function automation.partition_locks_of_run_release()
    returns trigger
    language plpgsql
    as $$
declare
    l record;
begin
    delete from automation.partition_lock_waiters w where w.run_id = new.run_id;
    for l in delete from automation.partition_locks k where k.run_id = new.run_id
             returning k.project_id, k.workflow_id, k.step_id, k.partition loop
        perform automation.partition_lock_wake(l.project_id, l.workflow_id, l.step_id, l.partition, new.updated_at);
    end loop;
    return null;
end
$$;

create trigger runs_partition_locks_release after update of state on automation.runs
    for each row
    when (new.state in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled')
          and old.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled'))
    execute function automation.partition_locks_of_run_release();

-- A partition skipped because another run was processing it: who (`run:RUN`) and why, with its skipped attempt.
create function automation.engine_op_partition_conflict(op jsonb) returns void
    language sql
    as $$
    update automation.run_partitions p
    set skipped_by = x.holder, skip_reason = x.reason, updated_at = x."now"
    from jsonb_to_record(op) as x(run_id text, step_id text, partition text, holder text, reason text,
                                  "now" timestamptz)
    where p.run_id = x.run_id and p.step_id = x.step_id and p.partition = x.partition
$$;

-- A since-last-success plan does not count a partition skipped for a conflict as processed: the other run's
-- outcome decides. As 0020 otherwise.
create or replace function automation.engine_op_partition_plan(op jsonb) returns void
    language plpgsql
    as $$
declare
    x record;
    taken text;
begin
    select * into x from jsonb_to_record(op) as r(run_id text, project text, workflow text, step_id text,
                                                  source text, keys jsonb, epoch integer, exclusive boolean,
                                                  "now" timestamptz);
    if x.exclusive then
        perform pg_advisory_xact_lock(hashtextextended('a44.partition_plan/' || x.project || '/' || x.workflow
                                                       || '/' || x.step_id, 0));
        select p.partition into taken
        from automation.run_partitions p
        join automation.runs r on r.run_id = p.run_id
        where p.project_id = x.project and p.workflow_id = x.workflow and p.step_id = x.step_id
          and p.run_id <> x.run_id
          and p.partition in (select jsonb_array_elements_text(x.keys))
          and ((p.state = 'success' or (p.state = 'skipped' and coalesce(p.skipped_by, '') not like 'run:%'))
               or r.state not in ('succeeded', 'partial', 'failed', 'compensation_failed', 'cancelled'))
        limit 1;
        if taken is not null then
            raise exception using errcode = 'A44PC',
                message = format('partition %s of step %s is taken by another run', taken, x.step_id);
        end if;
    end if;
    insert into automation.partition_plans (run_id, step_id, project_id, workflow_id, source, keys, epoch,
                                            planned_at)
    values (x.run_id, x.step_id, x.project, x.workflow, x.source, x.keys, x.epoch, x."now")
    on conflict (run_id, step_id) do nothing;
end
$$;

-- Appended after the transition that releases a waiting run to `waiting`: if a key it waits for was freed since it
-- was refused (the holder's release ran while this run still held its lease, so it could not wake it), it is due
-- now. The lock row is read `for share`: a release in flight is waited for, and one that comes later sees this run
-- `waiting` and wakes it itself. No wake-up is lost between the refusal and the release.
create function automation.engine_op_partition_wait_check(op jsonb) returns void
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
        for share;
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
