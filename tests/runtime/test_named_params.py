"""Named parameters in the store's queries: the loader turns `:name` into `$1..$n` once (leaving casts, strings,
quoted identifiers, comments, dollar-quoted bodies and array slices alone) and refuses a leftover `$n`; the store
binds arguments by name, and a missing or unknown name is an error naming the query and the names."""

from __future__ import annotations

import pytest

from anthares44.automation.named_sql import QueryError, to_positional
from anthares44.automation.runtime.store.vocabulary import load_queries


@pytest.mark.parametrize("written, positional, order", [
    ("select :a::int, x::text, :b", "select $1::int, x::text, $2", ("a", "b")),
    ("where run_id = :run_id and (:run_id::text is null)", "where run_id = $1 and ($1::text is null)", ("run_id",)),
    ("select ':no', 'it''s :no', E'\\' :no', \"col:no\"", "select ':no', 'it''s :no', E'\\' :no', \"col:no\"", ()),
    ("select 1 -- :no\n/* :no /* nested :no */ :no */ , :yes", "select 1 -- :no\n/* :no /* nested :no */ :no */ , $1",
     ("yes",)),
    ("do $$ begin x := :no; end $$; select $f$ :no $f$, :yes", "do $$ begin x := :no; end $$; select $f$ :no $f$, $1",
     ("yes",)),
    ("select a[1:n], a[lo:hi], (:arr::text[])[1:2], x = any(:ids::text[])",
     "select a[1:n], a[lo:hi], ($1::text[])[1:2], x = any($2::text[])", ("arr", "ids")),
    ("select '{\"a\": 1}'::jsonb, :j::jsonb", "select '{\"a\": 1}'::jsonb, $1::jsonb", ("j",)),
    ("select :a,:b,(:c)", "select $1,$2,($3)", ("a", "b", "c")),
])
def test_named_parameters_become_positional(written, positional, order):
    assert to_positional(written, "t") == (positional, order)


@pytest.mark.parametrize("text", ["select $1", "select :a, $2", "where x = $10"])
def test_a_positional_parameter_is_a_load_error(tmp_path, text):
    with pytest.raises(QueryError, match="positional parameter"):
        to_positional(text, "t")
    (tmp_path / "q.sql").write_text(f"-- name: q\n-- purpose: p\n{text};\n")
    with pytest.raises(QueryError, match="q.sql: query q"):
        load_queries(tmp_path)


def test_dollar_signs_that_are_not_parameters_load(tmp_path):
    assert to_positional("select 'cost $1', col$1, $$ $1 $$, $t$ $2 $t$", "t")[1] == ()


def test_fragments_take_the_parameters_of_the_query_that_includes_them(tmp_path):
    (tmp_path / "a.sql").write_text("-- fragment: pick\n-- purpose: one row\nselect :b, :a\n\n"
                                    "-- name: q\n-- purpose: uses pick\nwith x as (\n-- include: pick\n) "
                                    "select :a, :c from x;\n")
    q = load_queries(tmp_path)["q"]
    assert q.params == ("b", "a", "c") and "select $1, $2" in q.sql and q.sql.endswith("select $2, $3 from x;")
    assert ":b" in q.text


def test_every_store_query_has_named_parameters_only():
    queries = load_queries()
    assert queries["engine_attempt_record"].params[:3] == ("run_id", "step_id", "attempt")
    assert all("$" not in "".join(q.params) for q in queries.values())


def test_the_store_binds_by_name(store, aio):
    assert aio(store.fetchval("run_state", run_id="run_none", project=None)) is None

    async def in_transaction():
        async with store.transaction("t") as tx:
            return await tx.fetchrow("run_get", project=None, run_id="run_none")
    assert aio(in_transaction()) is None


def test_a_missing_or_unknown_name_is_refused_naming_the_query(store, aio):
    with pytest.raises(TypeError, match=r"query run_state \(api.sql\) takes run_id, project; missing project"):
        aio(store.fetchval("run_state", run_id="r"))
    with pytest.raises(TypeError, match=r"run_state .*unknown projetc"):
        aio(store.fetchval("run_state", run_id="r", project=None, projetc="p"))
    with pytest.raises(TypeError, match="no named query 'run_stat'"):
        aio(store.fetchval("run_stat", run_id="r"))
    with pytest.raises(TypeError):
        aio(store.fetchval("run_state", "r", None))          # positional arguments are not accepted

    async def many():
        async with store.transaction("t") as tx:
            await tx.executemany("run_event_append", [dict(run_id="r")])
    with pytest.raises(TypeError, match="run_event_append .*missing"):
        aio(many())
