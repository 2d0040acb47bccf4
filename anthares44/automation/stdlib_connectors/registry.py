"""The connector registry: turns a step's `uses` (the IR `ConnectorRef`) into the object the interpreter invokes.

Three sources, one lookup:
  * built-ins by name (`pass`, `http`, `sql/execute`), one instance per registry so that shared clients (the
    aiohttp session) live as long as the registry and are closed by `await registry.aclose()`;
  * declared instances (`uses: con_erp_private`): the built-in of the instance's `type`, wrapped so that every
    invocation sees the declared configuration in `StepContext.declared`;
  * plugins (`uses: connector/payments.authorize`): objects exposed under the entry point group
    `anthares44.automation.connectors`, loaded on first use and cached.
Anything else is `E_CONNECTOR_NOT_FOUND` with the list of what is installed, so the message says what to fix.

`validate_params(connector, rendered)` is the one place rendered parameters meet a connector's params model
(E_PARAMS_INVALID, permanent), so the interpreter and tests validate the same way.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import traceback
from collections.abc import Awaitable, Iterable, Mapping
from importlib import metadata
from typing import Any

from ..compiler.project import PLUGIN_GROUP
from ..errors import E_CONNECTOR_FAILED, E_CONNECTOR_NOT_FOUND, E_PARAMS_INVALID, A44Error
from ..redact import scrub
from .breaker import CircuitBreakers
from .pauses import FlowKey, FlowPauses
from .protocol import Connector, StepContext
from .services import BREAKER_STATE, CLOCK, NETWORKS, PAUSES, PUBLISHER, STORAGE, StaticSecrets

ENTRY_POINT_GROUP = PLUGIN_GROUP     # the one name, which the compiler also lists plugins by
PLUGIN_PREFIX = "connector/"
log = logging.getLogger("a44.connector")

# name -> "module:attribute" of the shipped built-ins; imported lazily so that importing the registry does not
# import aiohttp or asyncpg.
_BUILTINS: dict[str, str] = {
    "pass": "anthares44.automation.stdlib_connectors.pass_:PassConnector",
    "http": "anthares44.automation.stdlib_connectors.http:HttpConnector",
    "sql/execute": "anthares44.automation.stdlib_connectors.sql_execute:SqlExecuteConnector",
    "vpn/http": "anthares44.automation.stdlib_connectors.http:VpnHttpConnector",
    "storage/put": "anthares44.automation.stdlib_connectors.storage:StoragePutConnector",
    "storage/get": "anthares44.automation.stdlib_connectors.storage:StorageGetConnector",
    "bot/invoke": "anthares44.automation.stdlib_connectors.bot:BotInvokeConnector",
    "queue/publish": "anthares44.automation.stdlib_connectors.queue:QueuePublishConnector",
}
# services only some built-ins may see (services.py): the bus's publisher is for queue/publish, the breakers' state
# for the registry itself, and a control store an embedder left in the services for nobody; every other connector
# (sql/execute, plugins) is invoked without them
PRIVILEGED: dict[str, tuple[str, ...]] = {PUBLISHER: ("queue/publish",), BREAKER_STATE: (), PAUSES: (), "store": ()}


def _load_object(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _as_ref(ref: Any) -> tuple[str, str | None, str | None]:
    """(uses, kind, type) from a ConnectorRef, its dict form, or a bare `uses` string."""
    if isinstance(ref, str):
        return ref, None, None
    if isinstance(ref, Mapping):
        return str(ref.get("uses")), ref.get("kind"), ref.get("type")
    return str(ref.uses), getattr(ref, "kind", None), getattr(ref, "type", None)


def _as_config(decl: Any) -> dict[str, Any]:
    """A declared connector as plain JSON: accepts the compiler's ConnectorDecl model or a mapping."""
    if hasattr(decl, "model_dump"):
        return decl.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dict(decl)


class DeclaredConnector:
    """A declared instance (`con_...`): the built-in of its `type`, invoked with the declaration in the context."""

    def __init__(self, name: str, config: dict[str, Any], inner: Connector):
        self.name = name
        self.config = config
        self.inner = inner
        self.params_model = getattr(inner, "params_model", None)

    async def invoke(self, params: Any, ctx: StepContext) -> Any:
        return await self.inner.invoke(params, dataclasses.replace(ctx, declared=self.config))


class ConnectorRegistry:
    """Resolves connector references to connector objects; owns the built-ins' shared clients."""

    def __init__(self, declared: Mapping[str, Any] | Iterable[Any] | None = None, *,
                 entry_point_group: str = ENTRY_POINT_GROUP, secrets: Any = None, clock: Any = None,
                 networks: Mapping[str, Any] | None = None, storage: Any = None):
        self._group = entry_point_group
        # where `ctx.secret(ref)` looks unless the context brings its own (the engine's: environment, then
        # $A44_HOME/secrets.json); a mapping is a static source; None: none
        self.secrets = secrets if callable(secrets) or secrets is None else StaticSecrets(secrets)
        self.breakers = CircuitBreakers(clock)
        self.pauses = FlowPauses(clock)
        self.networks = networks          # vpn/http routes; None: read from $A44_HOME/networks.json (network.py)
        self.storage = storage            # the object store of storage/*; None: $A44_HOME/storage
        self._declared: dict[str, dict[str, Any]] = {}
        if isinstance(declared, Mapping):
            for cid, decl in declared.items():
                self._declared[cid] = _as_config(decl)
        elif declared is not None:
            for decl in declared:
                cfg = _as_config(decl)
                self._declared[cfg["id"]] = cfg
        self._builtins: dict[str, Connector] = {}       # instantiated on first use
        self._registered: dict[str, Connector] = {}     # register(): tests and embedders
        self._plugins: dict[str, Connector] = {}        # loaded entry points
        self._entry_points: dict[str, metadata.EntryPoint] | None = None

    # -- lookup -------------------------------------------------------------------------------------------------
    def get(self, ref: Any) -> Connector:
        """The connector for a `ConnectorRef` (or its dict form, or a bare `uses` string).

        The IR's `kind` is a compile-time observation; resolution goes by the `uses` value itself, so a plugin
        installed after publishing (kind `unresolved` in the IR) is still found."""
        uses, _kind, type_ = _as_ref(ref)
        if uses in self._registered:
            return self._registered[uses]
        if uses.startswith(PLUGIN_PREFIX):
            return self._plugin(uses[len(PLUGIN_PREFIX):], uses)
        config = ref.get("config") if isinstance(ref, Mapping) else getattr(ref, "config", None)
        if config:  # the IR carries the declaration it was published with
            return self._declared_from(uses, config, type_)
        if uses in self._declared or uses.startswith("con_"):
            return self._declared_instance(uses, type_)
        return self._builtin(uses)

    async def invoke(self, ref: Any, params: Any, ctx: StepContext) -> Any:
        """The whole call as the interpreter makes it: resolve, validate the rendered `params`, `call`. The
        interpreter applies its own timeout around this and records the result."""
        conn = self.get(ref)
        return await self.call(conn, validate_params(conn, params), ctx)

    async def call(self, conn: Connector, params: Any, ctx: StepContext) -> Any:
        """Invoke an already validated connector the way every attempt must be invoked (the interpreter calls this):
          * `ctx.secret()` reads this registry's secret source unless the context brings its own;
          * the registry's services (`storage`, `networks`) are visible to the connector in `ctx.services`;
            the PRIVILEGED ones only to the built-ins named there;
          * a declared instance with `circuitBreaker:` goes through its breaker (breaker.py, its state in the
            BreakerStateStore of `ctx.services`);
          * a connector that names a flow key (`http`) is not called while its key is paused, and a 429 pauses it
            (pauses.py, its state in the PauseStore of `ctx.services`);
          * any exception that is not an A44Error (nor a TimeoutError, which the interpreter's timeout judges)
            becomes E_CONNECTOR_FAILED (permanent) naming the connector;
          * every secret value handed out, and every value the attempt concealed (`ctx.conceal`: an OAuth access
            token), is scrubbed from the result and from an error's message, hint and details."""
        extra = {k: v for k, v in ((STORAGE, self.storage), (NETWORKS, self.networks),
                                   (CLOCK, self.breakers.clock)) if v is not None and k not in ctx.services}
        changes: dict[str, Any] = {}
        if ctx.secrets is None:
            changes["secrets"] = self.secrets
        if extra:
            changes["services"] = {**ctx.services, **extra}
        if changes:
            ctx = dataclasses.replace(ctx, **changes)
        breaker = None
        if isinstance(conn, DeclaredConnector):
            breaker = conn.config.get("circuitBreaker")
        hidden = [k for k in PRIVILEGED if k in ctx.services and not self._may_see(conn, k)]
        own = dataclasses.replace(ctx, services={k: v for k, v in ctx.services.items() if k not in hidden}) \
            if hidden else ctx
        def body() -> Awaitable[Any]:
            if breaker is not None:     # the breaker reads its shared state: it gets the full context
                return self.breakers.call(conn.name, breaker, ctx, lambda: conn.invoke(params, own))
            return conn.invoke(params, own)

        try:
            fk = self._flow_key(conn, params, ctx)
            result = await (self.pauses.call(fk, ctx, body) if fk is not None else body())
        except A44Error as err:
            self._scrub_error(err, ctx)
            raise
        except TimeoutError:
            raise
        except Exception as exc:  # noqa: BLE001 - a connector bug must still end as a coded, recorded failure
            needles = self._secret_values(ctx)
            log.debug("connector %s raised: %s", conn.name,
                      scrub("".join(traceback.format_exception(exc)), needles))
            raise A44Error(E_CONNECTOR_FAILED, scrub(f"connector {conn.name!r} raised {type(exc).__name__}: {exc}",
                                                     needles), step_id=ctx.step_id) from None
        return scrub(result, self._secret_values(ctx))

    @staticmethod
    def _flow_key(conn: Connector, params: Any, ctx: StepContext) -> FlowKey | None:
        """The flow key of this call when its connector names one (`http`: pauses.py), else None."""
        inner = conn.inner if isinstance(conn, DeclaredConnector) else conn
        flow_key = getattr(inner, "flow_key", None)
        if flow_key is None or PAUSES not in ctx.services:
            return None
        decl = conn.config if isinstance(conn, DeclaredConnector) else {}
        return flow_key(params, decl, conn.name, ctx.project_id)

    def _may_see(self, conn: Connector, service: str) -> bool:
        inner = conn.inner if isinstance(conn, DeclaredConnector) else conn
        return any(self._builtins.get(name) is inner for name in PRIVILEGED[service])

    def _secret_values(self, ctx: StepContext) -> tuple[str, ...]:
        values = getattr(ctx.secrets, "values", None)
        mine = self.secrets.values() if hasattr(self.secrets, "values") else ()
        return (*(values() if callable(values) else ()), *mine, *ctx.concealed)

    def _scrub_error(self, err: A44Error, ctx: StepContext) -> None:
        needles = self._secret_values(ctx)
        if not needles:
            return
        err.message = scrub(err.message, needles)
        err.args = (err.message,)
        if err.hint:
            err.hint = scrub(err.hint, needles)
        err.details = scrub(err.details, needles)

    def declared(self, uses: str) -> dict[str, Any] | None:
        """The configuration of a declared instance, as plain JSON, or None."""
        return self._declared.get(uses)

    def register(self, connector: Connector, name: str | None = None) -> None:
        """Install a connector under `name` (default: its `name`); it wins over built-ins and plugins."""
        self._registered[name or connector.name] = connector

    def list_installed(self) -> list[dict[str, Any]]:
        """What `get` can find: [{name, uses, source}] with source `builtin`, `registered`, `declared` or
        `<dist> <version>` of the entry point's distribution; sorted by `uses`."""
        out = [{"name": n, "uses": n, "source": "builtin"} for n in _BUILTINS]
        for ep in self._scan().values():
            dist = getattr(ep, "dist", None)
            source = f"{dist.name} {dist.version}" if dist is not None else "entry point"
            out.append({"name": ep.name, "uses": PLUGIN_PREFIX + ep.name, "source": source, "value": ep.value})
        for cid, cfg in self._declared.items():
            out.append({"name": cid, "uses": cid, "source": "declared", "type": cfg.get("type")})
        for name in self._registered:
            out.append({"name": name, "uses": name, "source": "registered"})
        return sorted(out, key=lambda d: (d["uses"], d["source"]))

    async def aclose(self) -> None:
        """Close the shared clients of every instantiated connector (built-ins and plugins with `aclose`)."""
        for conn in [*self._builtins.values(), *self._plugins.values(), *self._registered.values()]:
            close = getattr(conn, "aclose", None)
            if close is not None:
                await close()

    # -- sources ------------------------------------------------------------------------------------------------
    def _builtin(self, name: str) -> Connector:
        conn = self._builtins.get(name)
        if conn is not None:
            return conn
        spec = _BUILTINS.get(name)
        if spec is None:
            raise self._not_found(name)
        conn = _load_object(spec)()
        self._builtins[name] = conn
        return conn

    def _declared_instance(self, uses: str, type_hint: str | None) -> Connector:
        cfg = self._declared.get(uses)
        if cfg is None:
            raise self._not_found(uses, "it is not among the declared connectors this worker was given; "
                                        "publish its connectors file")
        return self._declared_from(uses, cfg, type_hint)

    def _declared_from(self, uses: str, cfg: dict[str, Any], type_hint: str | None) -> Connector:
        type_ = cfg.get("type") or type_hint
        if type_ not in _BUILTINS:
            raise self._not_found(uses, f"its type {type_!r} is not available in this version")
        return DeclaredConnector(uses, dict(cfg), self._builtin(type_))

    def _scan(self) -> dict[str, metadata.EntryPoint]:
        if self._entry_points is None:
            self._entry_points = {ep.name: ep for ep in metadata.entry_points(group=self._group)}
        return self._entry_points

    def _plugin(self, name: str, uses: str) -> Connector:
        conn = self._plugins.get(name)
        if conn is not None:
            return conn
        ep = self._scan().get(name)
        if ep is None:
            raise self._not_found(uses)
        try:
            obj = ep.load()
            # an entry point may name the connector object or its class
            conn = obj() if isinstance(obj, type) else obj
        except Exception as exc:  # noqa: BLE001 - a broken plugin is the user's problem, reported with its cause
            raise A44Error(E_CONNECTOR_NOT_FOUND, f"connector {uses!r} could not be loaded from {ep.value}: "
                                                  f"{type(exc).__name__}: {exc}") from exc
        if not callable(getattr(conn, "invoke", None)):
            raise A44Error(E_CONNECTOR_NOT_FOUND, f"connector {uses!r} ({ep.value}) has no invoke(params, ctx)")
        self._plugins[name] = conn
        return conn

    def _not_found(self, uses: str, why: str | None = None) -> A44Error:
        installed = ", ".join(d["uses"] for d in self.list_installed()) or "none"
        msg = f"connector {uses!r} is not installed" + (f" ({why})" if why else "") + f"; installed: {installed}"
        hint = None
        if uses.startswith(PLUGIN_PREFIX):
            hint = (f"install the package that provides the entry point {uses[len(PLUGIN_PREFIX):]!r} in the "
                    f"group {self._group!r}")
        return A44Error(E_CONNECTOR_NOT_FOUND, msg, hint=hint)


def validate_params(connector: Connector, params: Any) -> Any:
    """Rendered parameters -> what `connector.invoke` takes: an instance of its `params_model`, or the plain value
    when it has none. Failures are `E_PARAMS_INVALID` (permanent); the message lists fields, never values (they
    may hold secrets)."""
    model = getattr(connector, "params_model", None)
    if model is None:
        return params
    from pydantic import ValidationError

    try:
        return model.model_validate(params if params is not None else {})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                             for e in exc.errors(include_input=False))
        raise A44Error(E_PARAMS_INVALID, f"parameters of {connector.name!r} are invalid: {problems}") from exc
