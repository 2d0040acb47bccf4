"""Connector mocks: scripted outcomes per attempt, every call recorded, and a registry that fails closed.

`env.mock("connector/payments.charge", Fail("E_UPSTREAM_503"), Ok({"id": "ch_1"}))` answers the first call of each
step with the failure and the next with the result; the last outcome repeats. Each call is recorded (`Call`: step,
attempt, idempotency key, params as rendered, run). `MockRegistry` is the engine's connector registry under the
kit: a mocked `uses:` answers from its script, a connector that reaches only this test's own databases (`pass`,
`sql/execute`, `storage/*`, `queue/publish`) runs for real, and every other one (http, vpn/http, bots, plugins,
declared instances of those) fails closed with E_UNMOCKED_CONNECTOR.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..errors import CODES, E_UNMOCKED_CONNECTOR, A44Error
from ..stdlib_connectors.protocol import StepContext
from ..stdlib_connectors.registry import PLUGIN_PREFIX, ConnectorRegistry, DeclaredConnector

# built-ins whose effect stays inside the test's own databases and files: they run for real
LOCAL = frozenset({"pass", "sql/execute", "storage/put", "storage/get", "queue/publish"})


@dataclass(frozen=True)
class Ok:
    """The connector answers `result`."""
    result: Any = None


@dataclass(frozen=True)
class Fail:
    """The connector raises `code` (retryable or not as errors.py's table says, unless `retryable` is given)."""
    code: str
    message: str = ""
    retryable: bool | None = None
    retry_after_ms: int | None = None

    def error(self, step_id: str) -> A44Error:
        details: dict[str, Any] = {}
        if self.retryable is not None:
            details["retryable"] = self.retryable
        if self.retry_after_ms is not None:
            details["retry_after_ms"] = self.retry_after_ms
        info = CODES.get(self.code)
        return A44Error(self.code, self.message or (info.title if info else f"mocked failure {self.code}"),
                        step_id=step_id, details=details or None)


@dataclass(frozen=True)
class Call:
    """One call a mock answered."""
    uses: str
    run_id: str
    step_id: str
    attempt: int
    idempotency_key: str
    params: Any
    outcome: Ok | Fail


def outcome_of(spec: Any) -> Ok | Fail:
    """An outcome from its declarative form: `{ok: {...}}` or `{fail: E_CODE}` / `{fail: {code, message}}`."""
    if isinstance(spec, Ok | Fail):
        return spec
    if isinstance(spec, dict) and len(spec) == 1:
        (kind, value), = spec.items()
        if kind == "ok":
            return Ok(value)
        if kind == "fail":
            return Fail(value) if isinstance(value, str) else Fail(**value)
    raise ValueError(f"an outcome is {{ok: RESULT}} or {{fail: E_CODE}}, not {spec!r}")


@dataclass
class Mock:
    """A connector answering from a script, one outcome per call of each step (the last repeats)."""
    uses: str
    script: list[Ok | Fail]
    params_model: Any = None
    steps: dict[str, list[Ok | Fail]] = field(default_factory=dict)    # a step's own script, if it has one
    calls: list[Call] = field(default_factory=list)
    _seen: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))

    @property
    def name(self) -> str:
        return self.uses

    async def invoke(self, params: Any, ctx: StepContext) -> Any:
        n = self._seen[(ctx.run_id, ctx.step_id)]
        self._seen[(ctx.run_id, ctx.step_id)] = n + 1
        script = self.steps.get(ctx.step_id, self.script)
        outcome = script[min(n, len(script) - 1)] if script else Ok(None)
        plain = params.model_dump(mode="json", by_alias=True) if hasattr(params, "model_dump") else params
        self.calls.append(Call(self.uses, ctx.run_id, ctx.step_id, ctx.attempt, ctx.idempotency_key, plain, outcome))
        if isinstance(outcome, Fail):
            raise outcome.error(ctx.step_id)
        return outcome.result

    def calls_of(self, run_id: str | None = None, step_id: str | None = None) -> list[Call]:
        return [c for c in self.calls if (run_id is None or c.run_id == run_id)
                and (step_id is None or c.step_id == step_id)]


class Unmocked:
    """Stands in for a connector that would reach the outside world: every call fails closed."""
    params_model = None

    def __init__(self, uses: str):
        self.name = uses

    async def invoke(self, params: Any, ctx: StepContext) -> Any:
        raise A44Error(E_UNMOCKED_CONNECTOR, f"step {ctx.step_id} uses {self.name!r}, which would reach the outside "
                                             f"world, and the test mocks no such connector",
                       step_id=ctx.step_id, hint=f"env.mock({self.name!r}, Ok({{...}})), or `mocks:` in the "
                                                 f".a44test.yaml file")


class MockRegistry(ConnectorRegistry):
    """The registry of an engine under the test kit (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.mocks: dict[str, Mock] = {}
        self._unmocked: dict[str, Unmocked] = {}

    def mock(self, uses: str, *script: Any, step: str | None = None) -> Mock:
        """Script `uses` (for every step, or for `step` only: its own script, the others keep theirs)."""
        outcomes = [outcome_of(s) for s in script]
        m = self.mocks.get(uses)
        if m is None or step is None:
            try:      # the real connector's params model, so a mock refuses what the real one would
                model = getattr(super().get(uses), "params_model", None)
            except A44Error:
                model = None
            m = self.mocks[uses] = Mock(uses, [] if step is not None else outcomes, model)
        if step is not None:
            m.steps[step] = outcomes
        return m

    def mocked_plugins(self) -> frozenset:
        """The plugin names (`connector/<name>`) mocked here: publishing takes them as installed."""
        return frozenset(u[len(PLUGIN_PREFIX):] for u in self.mocks if u.startswith(PLUGIN_PREFIX))

    def get(self, ref: Any) -> Any:
        uses = ref if isinstance(ref, str) else ref.get("uses") if isinstance(ref, dict) else ref.uses
        if uses in self.mocks:
            return self.mocks[uses]
        try:
            real = super().get(ref)
        except A44Error:
            real = None
        inner = real.inner if isinstance(real, DeclaredConnector) else real
        if real is not None and any(self._builtins.get(n) is inner for n in LOCAL):
            return real
        if real is not None and uses in self._registered:
            return real          # an embedder's own in-process connector
        name = str(uses)   # a ref always names what it uses (a ConnectorRef's `uses` is optional only in its type)
        return self._unmocked.setdefault(name, Unmocked(name))
