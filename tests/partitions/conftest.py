from tests.connectors.conftest import serve  # noqa: F401  (the loopback aiohttp server fixture)
