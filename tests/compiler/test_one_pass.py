"""Lint reports every independent mistake of a file in one pass (hypothesis).

A valid workflow is built from slots of fixed lines; each mistake rewrites one line of one slot (a bad enum
value, a wrong duration, an unknown key, a duplicate step id, a bad `needs`, a template error, a CEL error,
a wrong type, a step id of the wrong form...), so every variant of the file keeps the same lines. The
diagnostics of a file with several mistakes must be exactly the union of those of the files with each
mistake alone: no mistake hides another (before, a shape error of the model hid every semantic one), and
none invents one.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anthares44.automation.compiler.lint import compile_sources
from anthares44.automation.compiler.source import load_bytes

SLOTS = 3

HEAD = ["name: one-pass", "version: 1", "description: fine", "queue: q_default", "steps:",
        "  - id: head", "    uses: pass", "    timeout: 1s", "  - id: other", "    sleep: 1s"]
TOP_MISTAKES = {
    2: ["descripton: fine", "description: [1, 2]"],       # unknown key, wrong type
    3: ["queue: 7"],                                          # wrong type
    7: ["    timeout: soon"],                                 # not a duration
}


def slot(k: int) -> list[str]:
    return [f"  - id: s{k}", "    uses: http", "    method: GET", f'    url: "https://example.com/{k}"',
            "    timeout: 10s", "    retry: {max: 2, strategy: fixed}", f'    if: "input.x > {k}"',
            "    needs: [head]"]


SLOT_MISTAKES = {
    0: ["  - id: other", "  - id: 9s", "  - id: s{k} x"],     # duplicate id, id of the wrong form
    2: ["    method: FETCH", "    methd: GET"],                # bad enum (connector params), unknown key
    3: ['    url: "https://example.com/{{ input.x"', "    url: 5"],   # template error, wrong type
    4: ["    timeout: 10x", "    timeout: -1s"],              # not a duration
    5: ["    retry: {max: 2, strategy: expo}", "    retry: {max: many}"],   # bad enum, wrong type (model)
    6: ['    if: "input.x >"', "    if: 3"],                  # CEL error, wrong type
    7: ["    needs: [nowhere]", "    needs: [head, 7]"],       # unknown step, wrong item
}

MISTAKES = [(None, line, text) for line, texts in TOP_MISTAKES.items() for text in texts] + \
           [(k, line, text) for k in range(SLOTS) for line, texts in SLOT_MISTAKES.items() for text in texts]


def build(chosen: list[int]) -> bytes:
    lines = list(HEAD)
    slots = [slot(k) for k in range(SLOTS)]
    for i in chosen:
        k, line, text = MISTAKES[i]
        if k is None:
            lines[line] = text
        else:
            slots[k][line] = text.replace("{k}", str(k))
    for s in slots:
        lines.extend(s)
    return ("\n".join(lines) + "\n").encode()


def findings(raw: bytes) -> set[tuple]:
    result = compile_sources([load_bytes(raw, "one-pass.yaml")], "lint", lower=False)
    # a message may name the step, whose id another mistake may change: positions and codes are what must hold
    return {(d.line, d.col, d.code) for d in result.diagnostics}


def _one_per_line(chosen: list[int]) -> bool:
    """Two mistakes on the same line are one rewrite of it, not independent."""
    where = [(MISTAKES[i][0], MISTAKES[i][1]) for i in chosen]
    return len(where) == len(set(where))


def test_the_valid_file_is_clean():
    assert findings(build([])) == set()


def test_each_mistake_alone_is_reported():
    for i in range(len(MISTAKES)):
        assert findings(build([i])), MISTAKES[i]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, len(MISTAKES) - 1), min_size=2, max_size=8, unique=True).filter(_one_per_line))
def test_mistakes_together_are_the_union_of_mistakes_alone(chosen):
    together = findings(build(chosen))
    alone = set().union(*(findings(build([i])) for i in chosen))
    assert together == alone
