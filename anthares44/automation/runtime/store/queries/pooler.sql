-- Queries of the pooler probe (runtime/store/pooler.py): which server backend answers a connection.

-- name: pooler_backend_pid
-- purpose: the pid of the server backend running this statement (a pooler may hand each transaction another)
select pg_backend_pid();

-- name: pooler_jit_on
-- purpose: whether the server JIT-compiles this session's statements (a44 turns it off; a pooler may not let it)
select current_setting('jit')::boolean;
