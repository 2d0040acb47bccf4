"""Private network routes of `vpn/http` (§14): which way a named `network` goes out, per project.

Configured outside the workflow (operations owns routes, not workflow authors), in `$A44_HOME/networks.json`
(or the file named by `A44_NETWORKS_FILE`; the engine hands the path to `vpn/http` as the `networks_file` service,
services.py), read on every lookup so a change needs no restart:

    {
      "pj_checkout": {                                  # project id
        "vpn_pj_checkout": {"proxy": "http://10.8.0.1:3128"}
      },
      "*": {                                            # every project
        "vpn_office": {"localAddress": "10.9.0.2"}
      }
    }

A route is either
  * `proxy`: an HTTP egress proxy on the private side: `http://` targets are sent to it in absolute form,
    `https://` targets are tunnelled with CONNECT; or
  * `localAddress`: a local source address (the VPN interface's): every connection is bound to it, so the kernel
    routes it over that interface, and a bind failure (address gone because the tunnel is down) fails the step.
A project entry wins over `*`. A network that is not configured, or a route that cannot be used, fails the step
with `E_TUNNEL_DOWN`: there is no fallback to the default route, ever.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import E_TUNNEL_DOWN, A44Error
from ..paths import a44_home
from ..settings import Settings


@dataclass(frozen=True)
class Route:
    network: str
    proxy: str | None = None
    local_address: str | None = None

    def describe(self) -> str:
        return f"proxy {self.proxy}" if self.proxy else f"local address {self.local_address}"


def networks_file(settings: Settings) -> Path:
    """`settings.networks_file` (A44_NETWORKS_FILE), else `networks.json` in the a44 home."""
    if settings.networks_file:
        return Path(settings.networks_file).expanduser()
    return a44_home(settings.home) / "networks.json"


def _load_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise A44Error(E_TUNNEL_DOWN, f"the network configuration {path} cannot be read: {exc}") from None
    return doc if isinstance(doc, dict) else {}


def resolve_route(project_id: str, network: str, config: Mapping[str, Any] | None = None, *,
                  path: Path | None = None) -> Route:
    """The route of `network` for `project_id`, from `config` (routes given as a mapping), else from the file at
    `path` (None: the default home's); E_TUNNEL_DOWN when there is none or it is malformed."""
    path = path if path is not None else networks_file(Settings())
    doc = config if config is not None else _load_file(path)
    entry = None
    for scope in (project_id, "*"):
        nets = doc.get(scope)
        if isinstance(nets, Mapping) and network in nets:
            entry = nets[network]
            break
    if not isinstance(entry, Mapping):
        raise A44Error(E_TUNNEL_DOWN, f"network {network!r} has no route for project {project_id!r}; "
                                      f"the request was not sent (no fallback to the default route)",
                       hint=f"configure it in {path}",
                       details={"retryable": True, "network": network})
    proxy, local = entry.get("proxy"), entry.get("localAddress")
    if bool(proxy) == bool(local):
        raise A44Error(E_TUNNEL_DOWN, f"network {network!r} must have exactly one of `proxy` or `localAddress`",
                       details={"retryable": False, "network": network})
    if proxy:
        parts = urlsplit(str(proxy))
        if parts.scheme != "http" or not parts.hostname:
            raise A44Error(E_TUNNEL_DOWN, f"network {network!r}: proxy must be an http:// URL",
                           details={"retryable": False, "network": network})
        return Route(network, proxy=str(proxy))
    try:
        ipaddress.ip_address(str(local))
    except ValueError:
        raise A44Error(E_TUNNEL_DOWN, f"network {network!r}: localAddress must be an IP address",
                       details={"retryable": False, "network": network}) from None
    return Route(network, local_address=str(local))
