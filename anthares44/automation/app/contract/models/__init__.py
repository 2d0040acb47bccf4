"""Request and answer bodies of the REST API as pydantic v2 models, one module per area. Requests are closed
(`extra="forbid"`, strict types) and validated on the way in; answers list the fields a client can rely on and
allow more (they are the CLI's `--format json` documents). openapi.py builds `openapi.json` from them."""
