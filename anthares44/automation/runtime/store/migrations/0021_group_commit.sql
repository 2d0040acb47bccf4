-- 0021_group_commit: the transitions of every run ready at the same moment commit in ONE transaction (docs/runtime.md,
-- "What keeps it fast"). `engine_commit` (0018) made a transition one statement; with many runs in flight each still
-- paid a commit (a WAL flush with fsync on) and a round trip. `engine_commit_many` applies a list of such
-- transitions in one statement, each inside its own exception block (a subtransaction), so one run's refusal
-- (lease lost, attempt not running, illegal transition) or failure rolls back that run's writes only and the
-- others commit together.

-- Apply `p_batches`, a JSON array of {run_id, owner, grant, current_step, now, ops} (the arguments of
-- `engine_commit`), in order, each all or nothing. Returns one element per batch, in order: null when it was
-- applied, else {sqlstate, message, detail, hint} of the error that refused it (nothing of that batch is written).
-- `p_synchronous_commit` (null: the server's setting) is this transaction's `synchronous_commit`, e.g. 'off' for
-- a deployment that accepts losing the last transitions on a crash (A44_SYNCHRONOUS_COMMIT).
create function automation.engine_commit_many(p_batches jsonb, p_synchronous_commit text) returns jsonb
    language plpgsql
    as $$
declare
    b jsonb;
    outcomes jsonb[] := '{}';
    code text;
    msg text;
    det text;
    hnt text;
begin
    if p_synchronous_commit is not null then
        perform set_config('synchronous_commit', p_synchronous_commit, true);
    end if;
    for b in select value from jsonb_array_elements(p_batches) loop
        begin
            perform automation.engine_commit(b ->> 'run_id', b ->> 'owner', (b ->> 'grant')::integer,
                                             b ->> 'current_step', (b ->> 'now')::timestamptz, b -> 'ops');
            outcomes := array_append(outcomes, null::jsonb);
        exception when others then
            get stacked diagnostics code = returned_sqlstate, msg = message_text, det = pg_exception_detail,
                                    hnt = pg_exception_hint;
            outcomes := array_append(outcomes, jsonb_build_object('sqlstate', code, 'message', msg, 'detail', det,
                                                                  'hint', hnt));
        end;
    end loop;
    return to_jsonb(outcomes);
end
$$;
