"""Workflows in code (§12): `@workflow`, `step.run`, `step.map`, `step.sleep`, `ctx.now()`, `ctx.random()`, and the
deterministic execution that fast-forwards a workflow function through its recorded history.

The coroutine of a workflow is never kept between visits. Each visit calls the function from the top; every
`step.run` first looks at the log (the `History` of the run's epoch): a step with a recorded success returns its
result without running the body, a step waiting for a retry or a sleep that has not ended suspends the visit
(`Suspend`, the run is released until then), and only the first step without an outcome really runs. The order
in which the function asks for steps is compared with the recorded order: a different step id at the same
position aborts the run with E_NONDETERMINISTIC_REPLAY (expected vs observed).

The execution talks to its `Host` (the engine's code driver, or a fixture replayer) for everything durable:
writing an attempt before it runs, its outcome after, and ctx values.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import inspect
import json
import random as _random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ..attempts import Attempt, StepAttempts, counts_against_budget, failed_status
from ..compiler.ir import DEFAULT_RETRY_BASE_MS, DEFAULT_RETRY_CAP_MS, RetryIR
from ..compiler.models.types import MAX_RUN_SPAN_MS
from ..compiler.retry_policy import Failure, retry_delay_ms
from ..durations import parse_duration
from ..errors import (
    E_CONNECTOR_FAILED,
    E_NETWORK,
    E_NONDETERMINISTIC_REPLAY,
    E_PARTITIONS_FAILED,
    E_STEP_TIMEOUT,
    A44Error,
)
from ..jsonenc import holds_nul
from .expectations import StepRows
from .map_items import map_keys
from .partition_plans import Partitions

CTX_PREFIX = "ctx."
DEFAULT_STEP_TIMEOUT = "60s"

_current: contextvars.ContextVar[Execution | None] = contextvars.ContextVar("a44_code_execution", default=None)
# the step whose body runs in this task: the items of a `step.map` run as concurrent tasks, each with its own
_running_step: contextvars.ContextVar[str | None] = contextvars.ContextVar("a44_code_step", default=None)


def item_id(name: str, key: str) -> str:
    """The step id of item `key` of `step.map(name, ...)`: `name[key]`, as a YAML fan-out step's partitions."""
    return f"{name}[{key}]"


def is_item(step_id: str) -> bool:
    return step_id.endswith("]") and "[" in step_id


# --- declaring workflows ----------------------------------------------------------------------------------------
def workflow_id_of(name: str) -> str:
    return "wf_" + name.replace("-", "_")


def source_sha256(fn: Callable) -> str:
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        text = getattr(fn, "__qualname__", repr(fn))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class WorkflowDef:
    """What `@workflow(name, version=N)` returns: the function plus its identity. Still callable directly."""
    name: str
    version: int
    fn: Callable[..., Awaitable[Any]]
    timeout: str | None = None
    max_duration: str | None = None     # how long a run may last, sleeps included (default 72 h, at most 400 d)

    @property
    def workflow_id(self) -> str:
        return workflow_id_of(self.name)

    @property
    def source_sha256(self) -> str:
        return source_sha256(self.fn)

    def __call__(self, *a, **kw):
        return self.fn(*a, **kw)


def workflow(name: str, *, version: int, timeout: str | None = None,
             max_duration: str | None = None) -> Callable[[Callable], WorkflowDef]:
    """`@workflow("tenant-onboard", version=4)` over `async def onboard(ctx, input)`; `max_duration="40d"` lets
    its runs last longer than 72 h (sleeps included, at most 400 d, docs/timers.md)."""
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError("workflow version must be a positive integer (§3)")
    if max_duration is not None and not 0 < duration_ms(max_duration) <= MAX_RUN_SPAN_MS:
        raise ValueError("max_duration must be a duration of at most 400d")

    def wrap(fn: Callable) -> WorkflowDef:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"workflow {name!r} must be an `async def` function")
        return WorkflowDef(name, version, fn, timeout, max_duration)

    return wrap


# --- what the log holds for one run epoch -------------------------------------------------------------------------
@dataclass
class History:
    steps: dict[str, StepAttempts] = field(default_factory=dict)
    # step ids in recorded order, without ctx values and map items (items run concurrently, in any order; their
    # keys come from the map's list, which the determinism of the code around them already covers)
    sequence: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, attempts: list[Attempt]) -> History:
        """`attempts` in log order (the order their first event was written)."""
        h = cls()
        for a in attempts:
            h.log(a.step_id).add(a)
            if a.kind == "action" and not a.step_id.startswith(CTX_PREFIX) and not is_item(a.step_id) \
                    and a.step_id not in h.sequence:
                h.sequence.append(a.step_id)
        for log in h.steps.values():
            log.sort()
        return h

    def log(self, step_id: str) -> StepAttempts:
        return self.steps.setdefault(step_id, StepAttempts())


# --- how a visit ends ---------------------------------------------------------------------------------------------
class Suspend(BaseException):
    """Unwinds the workflow function: nothing more can happen before `due` (retry delay or sleep end)."""

    def __init__(self, due: datetime, state: str):
        super().__init__(due, state)
        self.due, self.state = due, state


class StepFailed(Exception):
    """A step failed for good (after its retries): the run fails, completed steps are compensated."""

    def __init__(self, step_id: str, code: str, message: str):
        super().__init__(f"{step_id}: {code} {message}")
        self.step_id, self.code, self.message = step_id, code, message


class NonDeterministic(A44Error):
    def __init__(self, position: int, expected: str | None, observed: str | None):
        exp = f"step {expected!r}" if expected else "the end of the workflow"
        obs = f"step {observed!r}" if observed else "the workflow returning"
        super().__init__(E_NONDETERMINISTIC_REPLAY,
                         f"step #{position + 1}: the log recorded {exp} but the code asked for {obs}; code "
                         f"outside step.run must be deterministic (use ctx.now() / ctx.random())",
                         step_id=observed or expected,
                         hint="publish the change as a new version; runs in flight keep the version they started on",
                         details={"expected": expected, "observed": observed, "position": position + 1})
        self.expected, self.observed = expected, observed


class Host:
    """What an execution needs from whoever drives it. Times come from `now()` (the engine's clock)."""

    def now(self) -> datetime:
        raise NotImplementedError

    def rng(self) -> _random.Random:
        raise NotImplementedError

    async def start(self, step_id: str, attempt: int) -> Attempt:
        """Write the attempt's `running` row (committed) before the body runs."""
        raise NotImplementedError

    async def finish(self, a: Attempt, status: str, *, result: Any = None, error: A44Error | None = None,
                     retry_at: datetime | None = None, rows: dict | None = None) -> None:
        """Write the attempt's outcome (committed) before the step counts as done, with the row counts the step
        reported (`step.rows(...)` or its return's `rows`)."""
        raise NotImplementedError

    async def open_sleep(self, step_id: str, attempt: int, due: datetime | A44Error) -> Attempt:
        """Open a durable sleep due at `due` (§19): its `running` row with the instant stored (committed). An
        A44Error, or an instant past the run's deadline, fails the step for good (raises StepFailed)."""
        raise NotImplementedError

    async def start_child(self, step_id: str, attempt: int, spec: dict) -> Attempt:
        """Start child workflow `spec` (§21, docs/children.md) for step `step_id`: its `running` row and the child
        run in one commit; raises StepFailed when the child cannot be created (E_CHILD_*)."""
        raise NotImplementedError

    async def child_outcome(self, step_id: str, a: Attempt, spec: dict) -> Any:
        """The output of the child step `a` once its child ended (or started, for `wait: started`), recorded
        (committed); raises Suspend while it runs, StepFailed when it failed or timed out."""
        raise NotImplementedError

    def expire(self, a: Attempt) -> None:
        """An attempt found `running` by a new visit was interrupted: mark it lease_expired (with the next write)."""
        raise NotImplementedError

    def record_value(self, key: str, value: Any) -> None:
        """Record a ctx.now()/ctx.random() value (written with the next commit, before any effect can see it)."""
        raise NotImplementedError

    async def plan(self, plan_id: str, name: str, spec: dict, attempt: int) -> Attempt:
        """Decide and record (committed) the partition plan `plan_id` of `step.map(name, ...)`: its succeeded
        attempt holds the keys (sdk/partition_plans.py); raises StepFailed when planning fails."""
        raise NotImplementedError


# --- helpers ------------------------------------------------------------------------------------------------------
def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def jsonable(value: Any) -> Any:
    """Results go to the log as JSON: datetimes become ISO 8601 strings, tuples lists; ValueError or TypeError
    for what the log cannot hold."""
    def default(v):
        if isinstance(v, datetime):
            return _iso(v)
        if isinstance(v, timedelta):
            return v.total_seconds()
        raise TypeError(f"{type(v).__name__} is not JSON-serialisable")
    text = json.dumps(value, default=default, allow_nan=False)
    if holds_nul(text):         # PostgreSQL cannot store it: left to the commit, every visit would fail
        raise ValueError("a string holds the character U+0000, which PostgreSQL cannot store")
    return json.loads(text)


def duration_ms(value: str | int | float | timedelta | None, default: str | None = None) -> int:
    if value is None:
        value = default
    return int(parse_duration(value).total_seconds() * 1000)


def retry_ir(retry: dict | int | None):
    """`retry={"max": 4, "strategy": "exponential-jitter", "base": "1s", "cap": "30s"}` (or just a count)."""
    if retry is None:
        return RetryIR(max=0, strategy="none", base_ms=DEFAULT_RETRY_BASE_MS, cap_ms=DEFAULT_RETRY_CAP_MS)
    if isinstance(retry, int):
        retry = {"max": retry}
    return RetryIR(max=int(retry.get("max", 3)), strategy=retry.get("strategy", "exponential-jitter"),
                   base_ms=duration_ms(retry["base"]) if "base" in retry else DEFAULT_RETRY_BASE_MS,
                   cap_ms=duration_ms(retry["cap"]) if "cap" in retry else DEFAULT_RETRY_CAP_MS)


async def call_user(fn: Callable[[], Any], timeout_ms: int) -> Any:
    """Run a step body: an `async def` is awaited; a plain function runs in a thread (so a blocking client does
    not stall lease renewals) and an awaitable it returns (a lambda calling an async client) is awaited."""
    async with asyncio.timeout(max(timeout_ms, 1) / 1000):
        if inspect.iscoroutinefunction(fn):
            out = await fn()
        else:
            out = await asyncio.to_thread(fn)
        if inspect.isawaitable(out):
            out = await out
        return out


def as_error(exc: BaseException, step_id: str, timeout_ms: int) -> tuple[str, A44Error]:
    if isinstance(exc, TimeoutError):
        return "timeout", A44Error(E_STEP_TIMEOUT, f"step {step_id} did not finish within {timeout_ms} ms",
                                   step_id=step_id)
    if isinstance(exc, A44Error):
        if exc.step_id is None:
            exc.step_id = step_id
        return failed_status(exc.code), exc     # a client that ran out of the step's time: a timeout
    retryable = isinstance(exc, (ConnectionError, OSError))
    return "failed", A44Error(E_NETWORK if retryable else E_CONNECTOR_FAILED,
                              f"step {step_id} raised {type(exc).__name__}: {exc}", step_id=step_id)


# --- the execution ------------------------------------------------------------------------------------------------
class Context:
    """`ctx` of a workflow function: run identity, the deterministic `now()` / `random()`, and `partitions`
    (`since_last_success`, recorded plans of `step.map` keys)."""

    def __init__(self, execution: Execution, run_id: str, workflow_id: str, idempotency_key: str, input: Any):
        self._x = execution
        self.run_id = run_id
        self.workflow_id = workflow_id
        self.input = input
        self._run_key = idempotency_key
        self.partitions = Partitions(execution)

    @property
    def idempotency_key(self) -> str:
        """Inside a step body: the step's key `{run_id}:{step_id}` (§2), the same for every attempt. Outside: the
        run's idempotency key."""
        step = self._x.current_step
        if step and is_item(step):      # `{run_id}:{map}:{key}`, as a YAML partition's
            name, key = step[:-1].split("[", 1)
            return f"{self.run_id}:{name}:{key}"
        return f"{self.run_id}:{step}" if step else self._run_key

    def now(self) -> datetime:
        """The instant of the first execution, recorded; a replay gets the same value."""
        v = self._x.value("now", lambda: _iso(self._x.host.now()))
        return datetime.fromisoformat(v.replace("Z", "+00:00"))

    def random(self) -> float:
        """A float in [0, 1) drawn on the first execution, recorded."""
        return float(self._x.value("random", lambda: self._x.host.rng().random()))


class Execution:
    def __init__(self, wf: WorkflowDef, history: History, host: Host, *, run_id: str, idempotency_key: str,
                 input: Any):
        self.wf = wf
        self.history = history
        self.host = host
        self.ctx = Context(self, run_id, wf.workflow_id, idempotency_key, input)
        self.input = input
        self.position = 0                  # step calls so far in this execution
        self.failed_items: list[tuple[str, str, str]] = []   # (item, code, message) a `partial` map let fail
        self.item_ordinals: dict[str, int] = {}              # map item step id -> its position in the key list
        self._host = asyncio.Lock()        # map items start and finish one at a time, in a stable order
        self.completed: list[str] = []     # steps that succeeded, in order
        self.compensators: dict[str, Callable] = {}
        self._values: dict[str, int] = {}
        self._seen: set[str] = set()
        self.rows = StepRows()
        self.patches: dict[str, bool] = {}   # step.patched answers of this execution (patches.py)

    @property
    def current_step(self) -> str | None:
        return _running_step.get()

    @current_step.setter
    def current_step(self, step_id: str | None) -> None:
        _running_step.set(step_id)

    async def run(self) -> Any:
        """Call the workflow function from the top. Returns its result, or raises Suspend / StepFailed /
        NonDeterministic / the user's exception."""
        token = _current.set(self)
        try:
            result = await self.wf.fn(self.ctx, self.input)
        finally:
            _current.reset(token)
        if self.position < len(self.history.sequence):
            raise NonDeterministic(self.position, self.history.sequence[self.position], None)
        return jsonable(result)

    # --- ctx values ----------------------------------------------------------------------------------------------
    def value(self, what: str, make: Callable[[], Any]) -> Any:
        n = self._values[what] = self._values.get(what, 0) + 1
        key = f"{CTX_PREFIX}{what}#{n}"
        log = self.history.steps.get(key)
        if log is not None and log.last is not None and log.last.status == "succeeded":
            return log.last.result
        v = make()
        self.host.record_value(key, v)
        self.history.log(key).actions.append(Attempt(key, "action", 1, "succeeded", self.host.now(), result=v))
        return v

    # --- steps ---------------------------------------------------------------------------------------------------
    def _enter(self, step_id: str) -> StepAttempts:
        if not isinstance(step_id, str) or not step_id or step_id.startswith(CTX_PREFIX):
            raise ValueError(f"bad step id {step_id!r}")
        if step_id in self._seen:
            raise ValueError(f"step id {step_id!r} is used twice in one run; step ids must be unique")
        if is_item(step_id):
            self._seen.add(step_id)
            return self.history.log(step_id)
        seq = self.history.sequence
        if self.position < len(seq) and seq[self.position] != step_id:
            raise NonDeterministic(self.position, seq[self.position], step_id)
        if self.position >= len(seq) and step_id in seq:
            raise NonDeterministic(self.position, None, step_id)
        self.position += 1
        self._seen.add(step_id)
        return self.history.log(step_id)

    async def run_step(self, step_id: str, fn: Callable[[], Any], *, timeout: Any = None, retry: Any = None,
                       compensate: Callable[[], Any] | None = None, expect: Any = None) -> Any:
        checks = self.rows.programs(expect)     # a malformed expectation is the caller's bug: raised before running
        log = self._enter(step_id)
        last = log.last
        if last is not None and last.status == "succeeded":
            return self._done(step_id, last.result, compensate)
        if last is not None and last.status in ("failed", "timeout") and last.retry_at is None:
            raise StepFailed(step_id, last.error_code or E_CONNECTOR_FAILED, last.error_message or "")
        now = self.host.now()
        if last is not None and last.status in ("failed", "timeout") and now < last.retry_at:
            raise Suspend(last.retry_at, "waiting")
        if last is not None and last.status == "running":       # the previous visit died mid-step
            self.host.expire(last)
            last.status = "lease_expired"
        timeout_ms = duration_ms(timeout, DEFAULT_STEP_TIMEOUT)
        async with self._host:
            a = await self.host.start(step_id, log.next_attempt)
        log.actions.append(a)
        self.current_step = step_id
        self.rows.begin(step_id)
        try:
            result = jsonable(await call_user(fn, timeout_ms))
            rows = self.rows.reported(step_id, result)
            err = await self.rows.check(step_id, checks, rows, result, self.input)
        except Exception as exc:  # noqa: BLE001 - a step body's failure is the step's outcome
            status, err = as_error(exc, step_id, timeout_ms)
            async with self._host:
                await self._failed(log, a, status, err, retry_ir(retry), self.rows.reported(step_id, None))
            raise AssertionError("unreachable") from None  # pragma: no cover
        finally:
            self.current_step = None
        async with self._host:
            if err is not None:
                await self._failed(log, a, "failed", err, retry_ir(retry), rows)
            await self.host.finish(a, "succeeded", result=result, rows=rows)
        a.status, a.result = "succeeded", result
        return self._done(step_id, result, compensate)

    async def _failed(self, log: StepAttempts, a: Attempt, status: str, err: A44Error, policy,
                      rows: dict | None = None) -> None:
        n = log.counted_failures + (1 if counts_against_budget(status, err.code) else 0)
        delay = retry_delay_ms(policy, n, Failure.of(err), self.host.rng())
        now = self.host.now()
        retry_at = now + timedelta(milliseconds=delay) if delay is not None else None
        await self.host.finish(a, status, error=err, retry_at=retry_at, rows=rows)
        a.status, a.error_code, a.error_message, a.retry_at = status, err.code, err.message, retry_at
        if retry_at is not None:
            raise Suspend(retry_at, "waiting")
        raise StepFailed(a.step_id, err.code, err.message)

    def _done(self, step_id: str, result: Any, compensate: Callable | None) -> Any:
        self.completed.append(step_id)
        if compensate is not None:
            self.compensators[step_id] = compensate
        return result

    async def map(self, name: str, partitions, fn: Callable[[Any], Any], *, concurrency: int = 4,
                  timeout: Any = None, retry: Any = None, on_failure: str = "fail",
                  key: str | Callable[[Any], Any] | None = None) -> list[Any]:
        """Run `fn(key)` (with `key`: `fn(item)`, each item keyed by its field `key` or `key(item)`: map_items.py)
        once per partition key as the step `name[key]` (own attempts, retries, timeout, key
        `{run_id}:{name}:{key}`), at most `concurrency` at once; the results in key order. A recorded success is
        returned without running `fn` again, whatever happened after it. Items that fail for good: `fail` fails
        the run (E_PARTITIONS_FAILED, after the others finished); `partial` leaves None and the run ends
        `partial`. An item waiting for a retry suspends the visit once the items in flight have ended."""
        if on_failure not in ("fail", "partial"):
            raise ValueError("on_failure must be 'fail' or 'partial'")
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError("concurrency must be a positive integer")
        items = list(partitions)
        keys = map_keys(name, items, key)
        args = items if key is not None else keys
        outcomes: list[Any] = [None] * len(keys)
        failures: list[BaseException] = []

        for i, key in enumerate(keys):
            self.item_ordinals[item_id(name, key)] = i

        async def one(i: int, key: str):
            try:
                outcomes[i] = await self.run_step(item_id(name, key), lambda: fn(args[i]), timeout=timeout,
                                                  retry=retry)
            except (Suspend, StepFailed) as exc:
                failures.append(exc)

        running: set[asyncio.Task] = set()
        try:
            for i, key in enumerate(keys):
                if len(running) >= concurrency:
                    done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                    for t in done:
                        t.result()
                running.add(asyncio.create_task(one(i, key)))
            for t in await asyncio.gather(*running, return_exceptions=True):
                if isinstance(t, BaseException):
                    raise t
        finally:
            for t in running:
                t.cancel()
        suspends = [f for f in failures if isinstance(f, Suspend)]
        if suspends:
            raise min(suspends, key=lambda s: s.due)
        failed = [f for f in failures if isinstance(f, StepFailed)]
        if failed and on_failure == "fail":
            names = ", ".join(f"{f.step_id} ({f.code})" for f in failed)
            raise StepFailed(name, E_PARTITIONS_FAILED, f"{len(failed)} of {len(keys)} partition(s) failed after "
                                                        f"their retries: {names}")
        self.failed_items.extend((f.step_id, f.code, f.message) for f in failed)
        return outcomes

    async def sleep(self, step_id: str, duration: Any = None, *, tz: str | None = None,
                    dst_policy: str | None = None, until: Any = None) -> None:
        """A durable sleep: its due instant computed once, when it opens (sdk/timers.py), stored with its attempt
        and read back on every later execution; it fires once, recording how late."""
        from .timers import due_at_instant, due_for_duration

        log = self._enter(step_id)
        last = log.last
        if last is not None and last.status == "succeeded":
            self.completed.append(step_id)
            return
        if last is None:
            due: datetime | A44Error
            try:
                due = due_at_instant(step_id, until) if until is not None else \
                    due_for_duration(self.host.now(), duration, tz, dst_policy)
            except A44Error as err:
                due = err
            last = await self.host.open_sleep(step_id, 1, due)
            log.actions.append(last)
        end = last.due_at if last.due_at is not None else \
            last.started_at + timedelta(milliseconds=duration_ms(duration))     # opened before instants were stored
        now = self.host.now()
        if now < end:
            raise Suspend(end, "sleeping")
        late_ms = max(0, round((now - end).total_seconds() * 1000))
        await self.host.finish(last, "succeeded", result={"due_at": end.isoformat(), "late_ms": late_ms})
        last.status = "succeeded"
        self.completed.append(step_id)


async def _child_step(x: Execution, step_id: str, spec: dict) -> Any:
    """`step.workflow(...)`: one child run per step, its output the step's result (docs/children.md)."""
    log = x._enter(step_id)
    last = log.last
    if last is not None and last.status == "succeeded":
        x.completed.append(step_id)
        return last.result
    if last is not None and last.status != "running":
        raise StepFailed(step_id, last.error_code or E_CONNECTOR_FAILED, last.error_message or "")
    if last is None:
        last = await x.host.start_child(step_id, 1, spec)
        log.actions.append(last)
    result = await x.host.child_outcome(step_id, last, spec)
    last.status, last.result = "succeeded", result
    x.completed.append(step_id)
    return result


def current() -> Execution:
    x = _current.get()
    if x is None:
        raise RuntimeError("step.run / step.sleep are only available inside a running @workflow function")
    return x


class _Step:
    """`step.run(id, fn=..., timeout=..., retry=..., compensate=..., expect=...)`, `step.map(name, keys, fn,
    concurrency=...)`, `step.sleep(id, duration)` and, inside a step body, `step.rows(in_=..., out=..., error=...)`."""

    async def run(self, step_id: str, fn: Callable[[], Any] | None = None, *, timeout: Any = None,
                  retry: Any = None, compensate: Callable[[], Any] | None = None, expect: Any = None) -> Any:
        """`expect`: CEL condition(s) over `rows`, `result` and `input`, checked when the body returns; a false
        one fails the step with E_EXPECTATION_FAILED (not retried)."""
        if fn is None:
            raise TypeError("step.run needs fn=")
        return await current().run_step(step_id, fn, timeout=timeout, retry=retry, compensate=compensate,
                                        expect=expect)

    def patched(self, patch_id: str) -> bool:
        """`if step.patched("swap-b-c"): ... else: ...`: True on new runs and on runs that already took the new
        path, False on a run recorded before the change, so new code keeps it on the old path; the decision is
        recorded (a marker), every later visit and replay agrees (sdk/patches.py, docs/verify.md)."""
        from .patches import decide

        return decide(current(), patch_id)

    def rows(self, *, in_: int | None = None, out: int | None = None, error: int | None = None) -> None:
        """Report the running step's row counts (rows read, written, rejected); they add up into the run's
        summary (docs/rows.md). Only inside a step body; a later call replaces an earlier one."""
        x = current()
        if x.current_step is None:
            raise RuntimeError("step.rows() is only available inside a step body")
        x.rows.report(x.current_step, {"in": in_, "out": out, "error": error})

    async def sleep(self, step_id: str, duration: Any, *, tz: str | None = None,
                    dst_policy: str | None = None) -> None:
        """`step.sleep("cooldown", "30s")`, `step.sleep("next-cycle", "1mo", tz="America/Sao_Paulo")`: calendar
        units (`y mo w d`) in the wall time of `tz` (default UTC), then `h m s ms` elapsed (docs/timers.md)."""
        await current().sleep(step_id, duration, tz=tz, dst_policy=dst_policy)

    async def sleep_until(self, step_id: str, instant: Any) -> None:
        """`step.sleep_until("launch", "2026-07-01T09:00:00-03:00")` (or an aware datetime); a past one fires at
        once; a naive or unparseable one fails the step with E_SLEEP_INVALID."""
        await current().sleep(step_id, until=instant)

    async def workflow(self, step_id: str, name: str, *, input: Any = None, wait: str = "result",
                       timeout: Any = "1h", child_on_timeout: str = "cancel",
                       on_parent_cancel: str = "cancel") -> Any:
        """`await step.workflow("onboard", "tenant-onboard", input={...})`: start one run of the published
        workflow `name` (its latest version when the step starts) and, unless `wait="none"`, wait for it holding
        no worker; the result is `{"kind": "child", "run_id", "state", "output", ...}` (docs/children.md)."""
        if wait not in ("result", "started", "none") or child_on_timeout not in ("cancel", "keep") or \
                on_parent_cancel not in ("cancel", "abandon"):
            raise ValueError("wait is result|started|none, child_on_timeout cancel|keep, on_parent_cancel "
                             "cancel|abandon")
        spec = {"workflow_id": workflow_id_of(name), "input": jsonable(input if input is not None else {}),
                "wait": wait, "timeout_ms": duration_ms(timeout), "on_timeout": child_on_timeout,
                "on_parent_cancel": on_parent_cancel}
        return await _child_step(current(), step_id, spec)

    async def map(self, name: str, partitions, fn: Callable[[Any], Any], *, concurrency: int = 4,
                  timeout: Any = None, retry: Any = None, on_failure: str = "fail",
                  key: str | Callable[[Any], Any] | None = None) -> list[Any]:
        """`step.map("load-day", days, fn=lambda day: ..., concurrency=4)`: one recorded step per partition;
        `step.map("bill", invoices, bill_one, key="id")`: one per item, keyed by its `id`, `fn` gets the item."""
        return await current().map(name, partitions, fn, concurrency=concurrency, timeout=timeout, retry=retry,
                                   on_failure=on_failure, key=key)


step = _Step()
