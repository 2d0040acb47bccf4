"""How `publish --plan` prints its report (docs/deploys.md): text (counts, each older version's step diff, the
runs that are not compatible with their reasons) or GitHub Actions workflow commands (`--format github`: an
`::error` per blocked run, a `::warning` per mappable one, a `::notice` with the counts). Both read the report's
JSON document, so a local and a remote plan print the same."""

from __future__ import annotations

from typing import Any

TEXT_LIMIT = 20      # runs listed per workflow in text (the JSON lists every run)


def _esc(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def render_github(doc: dict[str, Any]) -> str:
    lines = []
    for w in doc["workflows"]:
        for r in w["runs"]:
            if r["class"] == "compatible":
                continue
            level = "error" if r["class"] == "blocked" else "warning"
            why = "; ".join(x["message"] for x in r["reasons"] if x["class"] == r["class"]) or r["class"]
            text = f"run {r['run_id']} (v{r['version']}) is {r['class']} at {r['first_difference']}: {why}"
            lines.append(f"::{level} title={_esc(w['workflow_id'])} v{w['version']} deploy plan::{_esc(text)}")
    c = doc["counts"]
    lines.append(f"::notice title=a44 deploy plan::{c['compatible']} compatible, {c['mappable']} mappable, "
                 f"{c['blocked']} blocked")
    return "\n".join(lines) + "\n"


def render_text(doc: dict[str, Any], limit: int = TEXT_LIMIT) -> str:
    out = []
    for w in doc["workflows"]:
        c = w["counts"]
        out.append(f"{w['workflow_id']} v{w['version']} ({w['versioning']}): {c['compatible']} compatible, "
                   f"{c['mappable']} mappable, {c['blocked']} blocked")
        for d in w["versions"]:
            parts = [f"{k} {', '.join(d[k])}" for k in ("added", "removed", "changed") if d[k]]
            out.append(f"  from v{d['from']} ({d['open_runs']} open): " + ("; ".join(parts) or "no step changed"))
            if d.get("migrate_unknown_steps"):
                out.append(f"    migrate names steps v{d['from']} does not have: "
                           f"{', '.join(d['migrate_unknown_steps'])}")
        shown = [r for r in w["runs"] if r["class"] != "compatible"]
        for r in shown[:limit]:
            out.append(f"  {r['run_id']} v{r['version']} {r['class']} at {r['first_difference']}")
            for x in r["reasons"]:
                out.append(f"    {x['class']}: {x['message']}" + (f" (hint: {x['hint']})" if x["hint"] else ""))
        if len(shown) > limit:
            out.append(f"  ... {len(shown) - limit} more (--format json lists every run)")
    if not doc["workflows"]:
        out.append("no workflow in the files")
    return "\n".join(out) + "\n"
