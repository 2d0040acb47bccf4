"""Generated workflow files for benchmarks: valid, varied, deterministic (same index -> same text).

Each workflow has `steps` steps cycling through the built-ins a real flow uses (http with templates,
sql/execute with params, pass with output, a conditional step, a DAG join with `needs`, a durable sleep).
"""

from __future__ import annotations

from pathlib import Path


def step_yaml(i: int, prev: str | None) -> str:
    sid = f"step-{i:02d}"
    kind = i % 6
    if kind == 0:
        return (f"  - id: {sid}\n    uses: http\n    timeout: 10s\n"
                f"    retry: {{ max: 3, strategy: exponential-jitter }}\n    method: POST\n"
                f"    url: \"https://api.example.com/v1/items/{{{{ input.itemId }}}}/{i}\"\n"
                f"    body:\n      amountCents: \"{{{{ input.amountCents }}}}\"\n")
    if kind == 1:
        return (f"  - id: {sid}\n    uses: sql/execute\n    timeout: 5s\n"
                f"    query: \"update items set stage = $1 where id = $2\"\n"
                f"    params: [{i}, \"{{{{ input.itemId }}}}\"]\n")
    if kind == 2:
        return (f"  - id: {sid}\n    uses: pass\n    timeout: 1s\n    output:\n      stage: {i}\n"
                f"      item: \"{{{{ input.itemId }}}}\"\n")
    if kind == 3 and prev:
        return (f"  - id: {sid}\n    uses: http\n    timeout: 10s\n"
                f"    if: \"input.amountCents > {i * 1000} && input.currency == 'BRL'\"\n"
                f"    method: GET\n    url: https://api.example.com/v1/health\n")
    if kind == 4 and prev:
        return (f"  - id: {sid}\n    uses: pass\n    timeout: 1s\n    needs: [{prev}]\n"
                f"    output: {{ joined: true }}\n")
    return f"  - {{ id: {sid}, sleep: {i + 1}s }}\n"


def workflow_yaml(index: int, steps: int = 10) -> str:
    lines = [f"name: bench-flow-{index}\n", f"version: {1 + index % 7}\n",
             "trigger:\n  event: bench.item.created\n", "steps:\n"]
    prev = None
    for i in range(steps):
        lines.append(step_yaml(i, prev))
        prev = f"step-{i:02d}"
    return "".join(lines)


def write_workflows(directory: Path, count: int, steps: int = 10) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for n in range(count):
        path = directory / f"flow-{n:04d}.yaml"
        path.write_text(workflow_yaml(n, steps), encoding="utf-8")
        paths.append(path)
    return paths


def long_workflow_yaml(steps: int, misspelt: bool = False) -> str:
    """One workflow of `steps` steps that exercises every per-step rule: mostly `pass` steps, with a `needs`, an
    `if:` and a template reading an earlier step in every ten, and durable sleeps (5 values each, so 14,000
    steps stay under the parser's 100,000-value budget). `misspelt`: every step instead names a step that does
    not exist (in `needs`, `if:` or a template, in turn): thousands of diagnostics, each with a hint."""
    lines = ["name: long-flow\nversion: 1\nsteps:\n"]
    for i in range(steps):
        head = f"  - {{id: s{i}, uses: pass, timeout: 1s"
        if misspelt:
            lines.append(head + (f", needs: [x{i}]}}\n", f", if: steps.x{i}.ok}}\n",
                                 f", output: '{{{{ steps.x{i}.ok }}}}'}}\n")[i % 3])
            continue
        kind = i % 10 if i else 0
        if kind == 4:
            lines.append(head + f", needs: [s{i - 1}]}}\n")
        elif kind == 5:
            lines.append(head + f", if: steps.s{i - 1}.ok}}\n")
        elif kind == 6:
            lines.append(head + f", output: '{{{{ steps.s{i - 2}.x }}}}'}}\n")
        elif kind >= 7:
            lines.append(f"  - {{id: s{i}, sleep: 1s}}\n")
        else:
            lines.append(head + "}\n")
    return "".join(lines)
