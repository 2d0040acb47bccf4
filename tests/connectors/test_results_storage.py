"""Step results over 256 KB go through the object-store interface of `storage/put` (§7.4): the attempt row keeps an
`a44-storage://<project>/_results/...` reference, `Store.load_result` reads it back, later steps see the value in
templates (also after the run was reloaded from the log), and `file://` references of older rows still load."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import pytest

from anthares44.automation.compiler.ir import ConnectorRef
from anthares44.automation.errors import E_PARAMS_INVALID, E_RESULT_TOO_LARGE, E_STORAGE_NOT_FOUND, A44Error
from anthares44.automation.runtime.store.core import Store
from anthares44.automation.runtime.store.results import MAX_INLINE_BYTES, ResultFiles, key_segment, result_key
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from anthares44.automation.stdlib_connectors.storage import LocalObjectStore, ObjectInfo
from tests.runtime.engine_support import node, publish_and_run, run_row, workflow

P = "pj_default"
BIG = {"blob": "z" * (300 * 1024), "n": 1}          # ~300 KB of JSON


class MemoryObjectStore:
    """A stand-in for an S3-compatible backend: the ObjectStore interface over a dict, nothing on disk."""

    def __init__(self):
        self.objects: dict[tuple[str, str], tuple[bytes, str]] = {}
        self.puts: list[tuple[str, str]] = []

    def _info(self, project, key, data, ctype) -> ObjectInfo:
        return ObjectInfo(key, len(data), hashlib.sha256(data).hexdigest(), ctype, f"a44-storage://{project}/{key}")

    def put(self, project, key, data, content_type):
        self.objects[(project, key)] = (bytes(data), content_type)
        self.puts.append((project, key))
        return self._info(project, key, data, content_type)

    def head(self, project, key):
        got = self.objects.get((project, key))
        return None if got is None else self._info(project, key, *got)

    def get(self, project, key):
        got = self.objects.get((project, key))
        if got is None:
            raise A44Error(E_STORAGE_NOT_FOUND, f"no object {project}/{key}")
        return got[0], self._info(project, key, *got)

    def delete(self, project, key):
        return self.objects.pop((project, key), None) is not None


class Big:
    """A connector whose result is ~300 KB."""

    name = "big"
    params_model = None

    def __init__(self):
        self.calls = 0

    async def invoke(self, params, ctx):
        self.calls += 1
        return BIG


def _ref(uses):
    return ConnectorRef(uses=uses, kind="builtin", type=uses)


# -- the results module on its own ---------------------------------------------------------------------------------
def test_large_result_is_an_object_under_the_reserved_prefix(tmp_path):
    files = ResultFiles(tmp_path)
    small = files.store({"a": 1}, project_id=P, run_id="run_1", step_id="s", epoch=0, kind="action", attempt=1)
    assert small.inline == '{"a":1}' and small.ref is None
    out = files.store(BIG, project_id=P, run_id="run_1", step_id="fetch", epoch=2, kind="compensation", attempt=3)
    assert out.inline is None and out.size > MAX_INLINE_BYTES
    assert out.ref == f"a44-storage://{P}/_results/run_1/fetch/e2-compensation-a3.json"
    path = tmp_path / P / "objects" / "_results" / "run_1" / "fetch" / "e2-compensation-a3.json"
    assert json.loads(path.read_bytes()) == BIG          # the local backend's layout, as storage/put's objects
    assert files.load(out.ref) == BIG
    # the same object through storage/get's store
    data, info = LocalObjectStore(tmp_path).get(P, "_results/run_1/fetch/e2-compensation-a3.json")
    assert info.size == out.size and info.content_type == "application/json" and json.loads(data) == BIG


def test_odd_step_ids_are_encoded_reversibly_into_valid_keys(tmp_path):
    assert key_segment("ctx.random#1") == "ctx.random=231"
    assert key_segment("..") == "=2E." and key_segment("a=b") == "a=3Db" and key_segment("é") == "=C3=A9"
    files = ResultFiles(tmp_path)
    out = files.store(BIG, project_id=P, run_id="run_1", step_id="ctx.random#1", epoch=0, kind="action", attempt=1)
    assert out.ref.endswith("/_results/run_1/ctx.random=231/e0-action-a1.json") and files.load(out.ref) == BIG
    assert result_key("run_1", "a b", 0, "action", 1) != result_key("run_1", "a_b", 0, "action", 1)


def test_old_file_references_are_still_read_and_bad_ones_are_coded(tmp_path):
    old = tmp_path / "results" / P / "run_1" / "s.e0.action.a1.json"     # the layout of the previous versions
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps(BIG))
    files = ResultFiles(tmp_path / "storage")
    assert files.load("file://" + str(old.resolve())) == BIG
    for ref in ("file:///no/such/file.json", f"a44-storage://{P}/_results/run_x/s/e0-action-a1.json",
                "s3://bucket/x"):
        with pytest.raises(A44Error) as exc:
            files.load(ref)
        assert exc.value.code == E_RESULT_TOO_LARGE
    out = files.store(BIG, project_id=P, run_id="run_1", step_id="s", epoch=0, kind="action", attempt=1)
    obj = tmp_path / "storage" / P / "objects" / "_results" / "run_1" / "s" / "e0-action-a1.json"
    obj.write_bytes(obj.read_bytes().replace(b"zzz", b"zzy", 1))          # edited behind the store's back
    with pytest.raises(A44Error, match="sha256"):
        files.load(out.ref)


def test_storage_put_cannot_write_under_the_results_prefix(tmp_path, make_ctx, aio):
    reg = ConnectorRegistry(storage=LocalObjectStore(tmp_path))
    try:
        with pytest.raises(A44Error) as exc:
            aio(reg.invoke("storage/put", {"key": "_results/run_1/s/e0-action-a1.json", "body": "x"}, make_ctx()))
        assert exc.value.code == E_PARAMS_INVALID
        assert not (tmp_path / P).exists()
        ok = aio(reg.invoke("storage/put", {"key": "results/_results", "body": "x"}, make_ctx()))
        assert ok["key"] == "results/_results"
    finally:
        aio(reg.aclose())


# -- through the store and the engine ------------------------------------------------------------------------------
def test_store_with_a_pluggable_backend_writes_and_loads_through_it(pg_url, clock, aio, tmp_path, make_ctx):
    backend = MemoryObjectStore()

    async def scenario():
        s = await Store.connect(pg_url, clock=clock, storage=backend)
        try:
            await s.ensure_partitions()
            await s.publish_version(P, "wf_a", 1, "a" * 64, {})
            run_id = (await s.create_run(P, "wf_a", {}, "k")).run_id
            ref = await s.record_attempt_start(run_id, "big", 1, project=P)
            out = await s.record_attempt_finish(ref, "succeeded", result=BIG)
            row = (await s.list_attempts(run_id))[0]
            return run_id, out, row, s.load_result(row)
        finally:
            await s.close()

    run_id, out, row, loaded = aio(scenario())
    key = f"_results/{run_id}/big/e0-action-a1.json"
    assert backend.puts == [(P, key)] and out["result_ref"] == f"a44-storage://{P}/{key}"
    assert row["result"] is None and row["result_ref"] == out["result_ref"] and row["result_bytes"] > MAX_INLINE_BYTES
    assert loaded == BIG
    assert not (tmp_path / "results").exists()           # nothing written beside the backend
    # the backend that holds results is the one storage/get reads: a step can fetch a result object by key
    reg = ConnectorRegistry(storage=backend)
    try:
        got = aio(reg.invoke("storage/get", {"key": key}, make_ctx()))
        assert got["inline"] is False and got["size"] == row["result_bytes"]
    finally:
        aio(reg.aclose())


def test_engine_records_a_reference_and_later_steps_see_the_whole_value(store, clock, aio, tmp_path):
    from anthares44.automation.runtime.engine import Engine

    big = Big()
    use = node("use", params={"output": {"len": {"$tpl": "{{ steps.fetch.output.blob | length }}"},
                                         "n": {"$tpl": "{{ steps.fetch.output.n }}"},
                                         "tail": {"$tpl": "{{ steps.fetch.output.blob[-3:] }}"}}})
    ir = workflow([node("fetch").model_copy(update={"connector": _ref("big")}),
                   node("nap", sleep_ms=60_000),
                   use.model_copy(update={"connector": _ref("pass")})], name="bigres")
    run_id = aio(publish_and_run(store, ir))
    reg = ConnectorRegistry()
    reg.register(big)
    assert aio(Engine(store, reg, clock=clock).drive()) == {run_id: "sleeping"}
    clock.advance(61)
    # a fresh engine: the run is rebuilt from the log, so `fetch`'s output comes back through load_result
    aio(Engine(store, reg, clock=clock).drive())
    run = aio(run_row(store, run_id))
    assert run["state"] == "succeeded", run
    assert big.calls == 1
    rows = {a["step_id"]: a for a in aio(store.list_attempts(run_id))}
    fetch = rows["fetch"]
    assert fetch["result"] is None and fetch["result_bytes"] > MAX_INLINE_BYTES
    assert fetch["result_ref"] == f"a44-storage://{P}/_results/{run_id}/fetch/e0-action-a1.json"
    assert store.load_result(fetch) == BIG
    assert store.load_result(rows["use"]) == {"len": 300 * 1024, "n": 1, "tail": "zzz"}
    assert (tmp_path / "results" / P / "objects" / "_results" / run_id / "fetch" / "e0-action-a1.json").is_file()


def test_rows_with_old_file_references_still_drive_a_run(store, clock, aio, tmp_path, pg_url):
    """A run whose large result was recorded by an older version (a file:// reference) resumes and templates it."""
    import asyncpg

    from anthares44.automation.runtime.engine import Engine

    big = Big()
    use = node("use", params={"output": {"$tpl": "{{ steps.fetch.output.n }}"}})
    ir = workflow([node("fetch").model_copy(update={"connector": _ref("big")}), node("nap", sleep_ms=60_000),
                   use.model_copy(update={"connector": _ref("pass")})], name="oldref")
    run_id = aio(publish_and_run(store, ir))
    reg = ConnectorRegistry()
    reg.register(big)
    assert aio(Engine(store, reg, clock=clock).drive()) == {run_id: "sleeping"}
    old = tmp_path / "old-results" / P / run_id / "fetch.e0.action.a1.json"
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps({**BIG, "n": 2}))

    async def rewrite():
        conn = await asyncpg.connect(pg_url)
        try:
            await conn.execute("update automation.step_attempts set result_ref = $1 where run_id = $2 and "
                               "step_id = 'fetch'", "file://" + str(old.resolve()), run_id)
        finally:
            await conn.close()

    aio(rewrite())
    clock.advance(timedelta(seconds=61))
    aio(Engine(store, reg, clock=clock).drive())
    run = aio(run_row(store, run_id))
    assert run["state"] == "succeeded" and run["result"]["use"] == 2 and big.calls == 1
