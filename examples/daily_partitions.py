"""The code twin of examples/daily-partitions.yaml (docs/partitions.md, docs/code-workflows.md): one export call per
day from input["from"] to input["to"] (inclusive) against input["baseUrl"], each day a recorded item of
`step.map` with its own attempts, retry, timeout and idempotency key `{run_id}:load-day:{day}`. A day that fails
for good does not hide behind "exit 0": the run ends `partial` and lists it, and

    a44 automation replay RUN --failed-partitions

calls exactly the failed days again; a day that succeeded is never called twice, whatever happens after it.
"""

import json
import urllib.error
import urllib.request
from datetime import date, timedelta

from anthares44.automation import step, workflow
from anthares44.automation.errors import A44Error


def days(first: str, last: str) -> list[str]:
    """Every ISO date from `first` to `last`, inclusive: derived from the input only, so a replay sees the same."""
    d, end = date.fromisoformat(first), date.fromisoformat(last)
    out = []
    while d <= end:
        out.append(d.isoformat())
        d += timedelta(days=1)
    return out


def load_day(base: str, day: str, key: str) -> dict:
    req = urllib.request.Request(f"{base}/day/{day}", headers={"Idempotency-Key": key})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:       # 4xx are the source's answer for good, 5xx worth a retry
        code = f"E_UPSTREAM_{exc.code}"
        raise A44Error(code, f"{day}: the export API answered {exc.code}",
                       details={"retryable": exc.code >= 500}) from None


@workflow("daily-partitions-code", version=1)
async def daily_partitions(ctx, input):
    loaded = await step.map("load-day", days(input["from"], input["to"]),
                            lambda day: load_day(input["baseUrl"], day, ctx.idempotency_key),
                            concurrency=4, timeout="2s", retry={"max": 1, "strategy": "fixed", "base": "200ms"},
                            on_failure="partial")
    return {"days": sum(1 for item in loaded if item is not None)}
