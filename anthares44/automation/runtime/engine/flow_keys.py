"""The keyer: computes the flow keys of new runs before their first admission (§22, docs/flow.md "Keys").

A run of a version with flow limits is created `flow_keyed = false` (trigger of migration 0039) and is not
claimable until its keys are known. Before each claim the engine keys such runs, oldest first, in batches of
BATCH until none is left or DRAIN batches are done (so a burst of one tenant does not hold the runs created after
it out of the claim for one claim per batch): each limit's
`key` CEL over the run's input, off the event loop and bounded in time like a trigger filter. Each run's keys are
then written by `automation.flow_key_run` in a transaction of their own, which also counts its rateLimit window
(a run past it is skipped, with why) and refuses a key that would make a limit's live keys exceed `max_keys`.
A key that fails to compute or gives null (or more than MAX_VALUE_LEN characters) dead-letters the run with
E_FLOW_KEY_INVALID: there is no shared default bucket. So does a `priority` that is not an integer 1..9 or a
fairness `weight` that is not a number in (0, 1000].
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ...compiler.ir import Expr, WorkflowIR
from ..evaluation import INGESTION_TIMEOUT_S, evaluate

if TYPE_CHECKING:
    from .worker import Engine

log = logging.getLogger("a44.flow")

MAX_LIVE_KEYS = 1_000_000     # live keys per limit (§22); past it a run with a new key is refused
MAX_VALUE_LEN = 200           # characters of a key's value
BATCH = 256
DRAIN = 64                    # batches keyed before one claim at most (16,384 runs): bounds the claim's delay
RECHECK = timedelta(seconds=1)
MAX_WEIGHT = 1000.0           # a fairness weight is > 0 and at most this
UNLIMITED = 2_147_483_647     # the "limit" of a fairness key: it orders admissions, it never holds one back


class KeyInvalid(Exception):
    """A key expression failed or gave nothing usable for this input."""


def key_text(value: Any) -> str:
    """A key's value as stored and shown (`tenant=acme`): strings as they are, anything else as compact JSON."""
    if value is None:
        raise KeyInvalid("gave null")
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    if text == "":
        raise KeyInvalid("gave an empty string")
    if len(text) > MAX_VALUE_LEN:
        raise KeyInvalid(f"gave {len(text)} characters (at most {MAX_VALUE_LEN})")
    return text


class FlowKeyer:
    def __init__(self, engine: Engine, max_keys: int = MAX_LIVE_KEYS):
        self.engine = engine
        self.max_keys = max_keys
        self._any: bool = False
        self._checked: datetime | None = None

    async def _in_use(self) -> bool:
        """Whether any version declares flow limits, read again at most once a second of the engine's clock: a
        deployment without them pays no statement per claim (a new one's runs wait at most that second)."""
        now = self.engine.clock.now()
        if not self._any and (self._checked is None or now - self._checked >= RECHECK):   # published stays
            self._any = bool(await self.engine.store.fetchval("flow_any_limits"))
            self._checked = now
        return self._any

    async def key_new(self) -> int:
        """Key the runs waiting for their keys, oldest first, up to DRAIN batches: a burst of one tenant's runs is
        keyed before the claim, so the runs created after it are claimable with it, not DRAIN claims later (keyed
        by creation time, a tenant's 10,000 earlier runs held every other tenant's runs out of the claim for ~40
        claims: issue 30's first bar). Returns how many were written or refused."""
        done = 0
        for _ in range(DRAIN):
            n, more = await self._key_batch()
            done += n
            if not more:
                break
        return done

    async def _key_batch(self) -> tuple[int, bool]:
        """One batch; returns how many were written or refused, and whether more may be waiting."""
        e = self.engine
        if not await self._in_use():
            return 0, False
        rows = await e.store.fetch("flow_unkeyed", limit=BATCH)
        done = 0
        for row in rows:
            ir = await e.workflow_ir(row["project_id"], row["workflow_id"], row["version"])
            doc = await self._doc(ir, row)
            outcome = await e.store.fetchval("flow_key_run", now=e.clock.now(), doc=json.dumps(doc),
                                             max_keys=self.max_keys)
            e.metrics[f"flow_keys_{outcome}"] += 1
            if outcome == "skipped":
                e.metrics["flow_rate_limited_total"] += 1
            elif outcome in ("invalid", "exhausted"):
                level = logging.ERROR if outcome == "exhausted" else logging.WARNING
                log.log(level, "run %s: dead-lettered by its flow limits: %s", row["run_id"],
                        doc.get("invalid") or f"a limit has {self.max_keys} live keys")
            done += outcome != "gone"
        return done, len(rows) == BATCH

    async def _doc(self, ir: WorkflowIR, row) -> dict[str, Any]:
        flow = ir.flow
        wf = row["workflow_id"]
        doc: dict[str, Any] = {"run_id": row["run_id"], "keys": [], "invalid": None}
        if flow is None:       # a version published before its IR carried flow: nothing to key
            return doc
        data = row["input"]
        data = json.loads(data) if isinstance(data, str) else data
        try:
            for i, c in enumerate(flow.concurrency):
                limit_id = "c:project" if c.scope == "project" else f"c:{wf}#{i}"
                value = await self._value(c.key, data, f"concurrency[{i}].key")
                doc["keys"].append({"key": f"{limit_id}={value}", "limit_id": limit_id, "value": value,
                                    "kind": "concurrency", "max_n": c.limit, "hold": c.hold})
            if flow.fairness is not None:
                limit_id = f"f:{wf}"
                value = await self._value(flow.fairness.key, data, "fairness.key")
                weight = 1.0 if flow.fairness.weight is None else \
                    await self._number(flow.fairness.weight, data, "fairness.weight", 0.0, MAX_WEIGHT)
                doc["keys"].append({"key": f"{limit_id}={value}", "limit_id": limit_id, "value": value,
                                    "kind": "fairness", "max_n": UNLIMITED, "weight": weight})
            if flow.priority is not None:
                p = flow.priority if isinstance(flow.priority, int) else \
                    await self._number(flow.priority, data, "priority", 1, 9, whole=True)
                doc["priority"] = int(p)
            for name, kind, w in (("throttle", "throttle", flow.throttle), ("rateLimit", "rate", flow.rate_limit)):
                if w is not None:
                    limit_id = f"{kind[0]}:{wf}"
                    value = await self._value(w.key, data, f"{name}.key")
                    doc["keys"].append({"key": f"{limit_id}={value}", "limit_id": limit_id, "value": value,
                                        "kind": kind, "max_n": w.limit, "per_ms": w.per_ms, "burst": w.burst})
        except KeyInvalid as exc:
            doc["invalid"] = str(exc)
        return doc

    async def _value(self, expr: Expr, data: Any, where: str) -> str:
        try:
            value = await evaluate(self.engine.program(None, expr), {"input": data}, INGESTION_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any failure of the expression is this run's, never the daemon's
            raise KeyInvalid(f"{where} `{expr.cel}` cannot be computed from this input: {exc}") from None
        try:
            return key_text(value)
        except KeyInvalid as exc:
            raise KeyInvalid(f"{where} `{expr.cel}` {exc}") from None

    async def _number(self, expr: Expr, data: Any, where: str, low: float, high: float, whole: bool = False) -> float:
        try:
            value = await evaluate(self.engine.program(None, expr), {"input": data}, INGESTION_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any failure of the expression is this run's, never the daemon's
            raise KeyInvalid(f"{where} `{expr.cel}` cannot be computed from this input: {exc}") from None
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and \
            (value >= low if whole else value > low) and value <= high and (not whole or float(value).is_integer())
        if not ok:
            want = f"an integer {low:g}..{high:g}" if whole else f"a number > {low:g} and <= {high:g}"
            raise KeyInvalid(f"{where} `{expr.cel}` gave {value!r}, not {want}")
        return float(value)

    async def sweep(self, idle_s: float = 3600.0, limit: int = 1000) -> int:
        """Forget keys idle for `idle_s` (or their window) that no unfinished run names."""
        if not await self._in_use():
            return 0
        return await self.engine.store.fetchval("flow_keys_sweep", now=self.engine.clock.now(),
                                                idle=timedelta(seconds=idle_s), limit=limit) or 0
