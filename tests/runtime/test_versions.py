"""§3.8 publish rules: identical = no-op, same version with other steps = refused, lower version = refused."""

import pytest

from anthares44.automation.errors import E_VERSION_CONFLICT, E_VERSION_REGRESSION, E_WORKFLOW_NOT_FOUND, A44Error

P = "pj_default"
SHA1, SHA2, SHA3 = "1" * 64, "2" * 64, "3" * 64


def test_publish_rules(store, aio):
    async def body():
        assert await store.publish_version(P, "wf_a", 3, SHA1, {"nodes": [1]}) == "created"
        assert await store.publish_version(P, "wf_a", 3, SHA1, {"nodes": [1]}) == "unchanged"
        with pytest.raises(A44Error) as conflict:
            await store.publish_version(P, "wf_a", 3, SHA2, {"nodes": [2]})
        assert conflict.value.code == E_VERSION_CONFLICT
        assert "increment" in conflict.value.hint and "4" in conflict.value.hint
        with pytest.raises(A44Error) as regression:
            await store.publish_version(P, "wf_a", 2, SHA2, {"nodes": [2]})
        assert regression.value.code == E_VERSION_REGRESSION and "3" in regression.value.message
        assert await store.publish_version(P, "wf_a", 4, SHA2, {"nodes": [2]}) == "created"
        # the older version is kept as published: runs in flight keep theirs
        assert (await store.get_version(P, "wf_a", 3))["ir"] == {"nodes": [1]}
        latest = await store.latest_version(P, "wf_a")
        assert (latest["version"], latest["sha256"], latest["ir"]) == (4, SHA2, {"nodes": [2]})
        # projects are separate namespaces
        assert await store.publish_version("pj_other", "wf_a", 1, SHA3, {}) == "created"
        with pytest.raises(A44Error) as missing:
            await store.latest_version(P, "wf_nope")
        assert missing.value.code == E_WORKFLOW_NOT_FOUND

    aio(body())


def test_publish_records_the_clock_time(store, clock, aio):
    aio(store.publish_version(P, "wf_t", 1, SHA1, {}))
    assert aio(store.get_version(P, "wf_t", 1))["published_at"] == clock.now()
