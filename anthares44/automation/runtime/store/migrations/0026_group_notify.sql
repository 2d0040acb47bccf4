-- 0026_group_notify: the NOTIFYs of a group's runs ride in the group's own transaction (docs/runtime.md,
-- "What keeps it fast"); PostgreSQL delivers them at its commit, so a listener still reads the committed rows.
-- Run ids on `a44_run_events` for every batch applied, and the earliest `due_ms` (epoch ms) of the applied batches
-- that released a run to a wait on `a44_runs_due`. Until now the engine sent them after the commit as a statement
-- of its own (engine_notify): one more round trip and transaction per group, and for one run at a time one more
-- on every run's way to its end. A refused batch wrote nothing and notifies nothing.
create or replace function automation.engine_commit_many(p_batches jsonb, p_synchronous_commit text) returns jsonb
    language plpgsql
    as $$
declare
    b jsonb;
    outcomes jsonb[] := '{}';
    code text;
    msg text;
    det text;
    hnt text;
    due bigint;
begin
    if p_synchronous_commit is not null then
        perform set_config('synchronous_commit', p_synchronous_commit, true);
    end if;
    for b in select value from jsonb_array_elements(p_batches) loop
        begin
            perform automation.engine_commit(b ->> 'run_id', b ->> 'owner', (b ->> 'grant')::integer,
                                             b ->> 'current_step', (b ->> 'now')::timestamptz, b -> 'ops');
            outcomes := array_append(outcomes, null::jsonb);
            perform pg_notify('a44_run_events', b ->> 'run_id');
            if b ? 'due_ms' then
                due := least(due, (b ->> 'due_ms')::bigint);
            end if;
        exception when others then
            get stacked diagnostics code = returned_sqlstate, msg = message_text, det = pg_exception_detail,
                                    hnt = pg_exception_hint;
            outcomes := array_append(outcomes, jsonb_build_object('sqlstate', code, 'message', msg, 'detail', det,
                                                                  'hint', hnt));
        end;
    end loop;
    if due is not null then
        perform pg_notify('a44_runs_due', due::text);
    end if;
    return to_jsonb(outcomes);
end
$$;
