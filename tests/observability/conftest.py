from tests.ingestion.conftest import live, project  # noqa: F401 - the live ingestion server and its project
