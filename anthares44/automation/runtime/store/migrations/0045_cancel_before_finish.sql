-- 0045_cancel_before_finish: a cancel the API answered `requested` always ends the run `cancelled` (docs/states.md
-- "Cancel"). Until now the daemon holding the run learnt of the request only from its NOTIFY: a run whose last step
-- ended before the NOTIFY reached its driver finished `succeeded` (or `partial`) and kept the request's
-- E_RUN_CANCELLED on a finished run. `engine_commit_v2` reads the request of a batch that ends the run under the
-- row lock (a request either committed before and is seen, or waits and then finds the run finished and is refused),
-- then hands the batch to engine_commit (0028). A batch that would end the run succeeded or partial while a request
-- is on it writes nothing and raises A44CQ; the
-- driver then takes its cancel path (cancelled, or compensations first) with the same batch's records.
-- Additive: engine_commit and engine_commit_many (0026, 0028) stay for the daemons of schema 44 still calling them.

create function automation.engine_commit_v2(p_run_id text, p_owner text, p_grant integer,
                                            p_current_step text, p_now timestamptz, p_ops jsonb)
    returns text
    language plpgsql
    as $$
declare
    asked timestamptz;
begin
    -- only a batch that ends the run succeeded or partial reads the request (once per run); every other batch is
    -- engine_commit's as before. The row lock taken here is the one engine_commit's fence takes again.
    if p_ops @> '[{"op": "run_transition", "to": "succeeded", "finished": true}]'
       or p_ops @> '[{"op": "run_transition", "to": "partial", "finished": true}]' then
        select cancel_requested_at into asked from automation.runs
        where run_id = p_run_id and lease_owner = p_owner and lease_grants = p_grant
        for update;
        if asked is not null then
            raise exception using errcode = 'A44CQ',
                message = format('run %s has a cancel request (since %s): it ends cancelled', p_run_id, asked);
        end if;
    end if;
    return automation.engine_commit(p_run_id, p_owner, p_grant, p_current_step, p_now, p_ops);
end
$$;

-- As 0026, each batch through engine_commit_v2.
create function automation.engine_commit_many_v2(p_batches jsonb, p_synchronous_commit text) returns jsonb
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
            perform automation.engine_commit_v2(b ->> 'run_id', b ->> 'owner', (b ->> 'grant')::integer,
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
