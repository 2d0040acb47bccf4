"""Prints the CEL conformance table (pass/fail/skip per file) at the end of a run in one process that executed it
(`-n 0`: under pytest-xdist the results stay in the workers)."""

from __future__ import annotations


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    import sys
    mod = sys.modules.get(__package__ + ".test_conformance") if __package__ else None
    if mod is None:
        mod = next((m for n, m in sys.modules.items() if n.endswith("test_conformance")
                    and hasattr(m, "RESULTS")), None)
    results = getattr(mod, "RESULTS", None)
    if not results:
        return
    tr = terminalreporter
    tr.write_sep("-", "CEL conformance (cel-spec simple tests)")
    tr.write_line(f"{'file':<14}{'pass':>6}{'fail':>6}{'skip':>6}  skip reasons")
    for name in sorted(results):
        c = results[name]
        reasons = ", ".join(f"{k}={v}" for k, v in sorted(c["skips"].items()))
        tr.write_line(f"{name:<14}{c['pass']:>6}{c['fail']:>6}{c['skip']:>6}  {reasons}")
    total = {k: sum(r[k] for r in results.values()) for k in ("pass", "fail", "skip")}
    tr.write_line(f"{'total':<14}{total['pass']:>6}{total['fail']:>6}{total['skip']:>6}")
