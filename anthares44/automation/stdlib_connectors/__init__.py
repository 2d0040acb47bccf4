"""The built-in connectors (§14), the registry that finds connectors (built-in, declared, plugin) and the
protocol they implement. Importing this package imports neither aiohttp nor asyncpg: each connector module
imports its client library when first used."""

from .protocol import Connector, StepContext
from .registry import ConnectorRegistry, validate_params

__all__ = ["Connector", "ConnectorRegistry", "StepContext", "validate_params"]
