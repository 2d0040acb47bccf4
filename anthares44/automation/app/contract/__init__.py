"""The REST API's contract, shared by the daemon that serves it (`http/`) and the client that calls it
(`app/remote*.py`): the endpoints (method and path, endpoints.py), the request and answer models (models/), and
one `typing.Protocol` per service that the local app classes and their REST twins both implement (services.py).
Nothing here imports aiohttp: the client and the lint path can import it."""
