"""Compile time grows linearly with the number of steps: the "finished before" sets (`compiler/graph.py`), line
and column lookups (`SourceFile.line_col`), the search for indenting tabs, did-you-mean hints and name listings
(`suggestions.py`) must not cost O(steps) per step, per line or per diagnostic. Time ratios use the best of 3 runs of each size in CPU time of this
process (other processes on the machine do not count), and a bound between linear (4x for 4x the steps) and
quadratic (16x)."""

from __future__ import annotations

import gc
import importlib.util
import random
import re
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from anthares44.automation.compiler.graph import edges, predecessors
from anthares44.automation.compiler.lint import lint_paths
from anthares44.automation.compiler.source import SourceFile, load_text

_spec = importlib.util.spec_from_file_location(
    "workflow_gen", Path(__file__).resolve().parents[2] / "bench" / "workflow_gen.py")
workflow_gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(workflow_gen)


def _best_compile(path: Path, reps: int = 3) -> tuple[float, object]:
    # without the cyclic collector while timed, as timeit does: its full passes cost what the whole test process
    # holds (an xdist worker's leftovers of earlier tests), not what the compiler does (6.8x once in a full run)
    best, result = float("inf"), None
    for _ in range(reps):
        gc.collect()
        gc.disable()
        try:
            start = time.process_time()
            result = lint_paths([str(path)], lower=True)
            best = min(best, time.process_time() - start)
        finally:
            gc.enable()
    return best, result


@pytest.mark.parametrize("misspelt", [False, True], ids=["valid", "misspelt"])
def test_four_times_the_steps_take_well_under_sixteen_times_as_long(tmp_path, misspelt):
    small, large = tmp_path / "small.yaml", tmp_path / "large.yaml"
    small.write_text(workflow_gen.long_workflow_yaml(1_500, misspelt))
    large.write_text(workflow_gen.long_workflow_yaml(6_000, misspelt))
    t_small, r_small = _best_compile(small)
    t_large, r_large = _best_compile(large)
    if misspelt:
        assert len(r_large.diagnostics) == 6_000 and len(r_small.diagnostics) == 1_500
    else:
        assert not r_large.diagnostics and len(r_large.irs) == 1
    assert t_large / t_small < 6, f"1,500 steps {t_small:.2f}s, 6,000 steps {t_large:.2f}s"


def test_diagnostics_stay_short_however_many_steps(tmp_path):
    """Messages and hints name a few steps, not all of them: the output is linear in the mistakes."""
    path = tmp_path / "w.yaml"
    path.write_text(workflow_gen.long_workflow_yaml(600, misspelt=True))
    result = lint_paths([str(path)])
    assert len(result.diagnostics) == 600
    longest = max(result.diagnostics, key=lambda d: len(d.message) + len(d.hint or ""))
    assert len(longest.message) + len(longest.hint or "") < 300, longest


def _closure(wf) -> dict[str, set[str]]:
    """What every step certainly follows, by a plain graph walk per step."""
    direct: dict[str, set[str]] = {s.id: set() for s in wf.steps}
    for a, b in edges(wf):
        direct[b].add(a)
    out = {}
    for sid in direct:
        seen: set[str] = set()
        stack = list(direct[sid])
        while stack:
            n = stack.pop()
            if n not in seen and n != sid:
                seen.add(n)
                stack.extend(direct[n])
        out[sid] = seen
    return out


def test_before_sets_are_the_transitive_closure_of_the_edges():
    """Random graphs with cycles, duplicate ids, self-references and unknown names in `needs`."""
    rng = random.Random(7)
    for _ in range(1500):
        n = rng.randint(1, 12)
        ids = [f"s{rng.randint(0, n)}" for _ in range(n)]
        steps = [SimpleNamespace(id=sid, needs=[rng.choice(ids + ["nope"]) for _ in range(rng.randint(0, 3))]
                                 if rng.random() < 0.5 else None) for sid in ids]
        wf = SimpleNamespace(steps=steps)
        want, got = _closure(wf), predecessors(wf)
        assert set(got) == set(want)
        for sid, before in got.items():
            assert list(before) == sorted(want[sid]) and len(before) == len(want[sid])
            assert bool(before) == bool(want[sid])
            assert all((x in before) == (x in want[sid]) for x in ids + ["nope"])
            assert before.first(3) == sorted(want[sid])[:3]
            assert list(before.including(sid)) == sorted(want[sid] | {sid})


def test_line_col_is_what_counting_newlines_gives():
    rng = random.Random(3)
    for _ in range(300):
        text = "".join(rng.choice("ab\n") for _ in range(rng.randint(0, 40)))
        src = SourceFile("x.yaml", text)
        for i in range(len(text) + 2):
            line = text.count("\n", 0, i) + 1
            assert src.line_col(i) == (line, i - (text.rfind("\n", 0, i) + 1) + 1)


def test_tabs_inside_a_long_block_scalar_are_found_in_one_pass():
    """Every tab-indented line of a block scalar's content used to walk back to the block's header."""
    text = "name: x\nversion: 1\nsteps:\n  - id: a\n    uses: pass\n    timeout: 1s\n    body: |\n" + \
        "      \tcontent\n" * 20_000
    start = time.process_time()
    src = load_text(text, "w.yaml")
    assert time.process_time() - start < 2
    assert src.parsed and not src.diagnostics


def _tab_walking_back(text: str) -> list[tuple[int, int]]:
    """Tabs used for indentation, by walking back from each tab's line to an enclosing block header."""
    lines = text.split("\n")
    found = []
    for number, line in enumerate(lines, 1):
        spaces = len(line) - len(line.lstrip(" "))
        if line[spaces:spaces + 1] != "\t":
            continue
        lowest, inside = spaces, False
        for prev in reversed(lines[:number - 1]):
            if not prev.strip():
                continue
            indent = len(prev) - len(prev.lstrip(" "))
            if indent < lowest and re.search(r"[|>][-+0-9]*[ \t]*(#.*)?$", prev):
                inside = True
                break
            if indent == 0:
                break
            lowest = min(lowest, indent)
        if not inside:
            found.append((number, spaces + 1))
    return found


def test_tab_diagnostics_are_those_of_walking_back_from_each_tab():
    rng = random.Random(5)
    pieces = ["a: |", "b: >-", "c: x", "  ", "    ", "\t", "\tx", "  \ty", "- |", "  k: |+2 # c", "", " ", "x"]
    for _ in range(3000):
        text = "\n".join("".join(rng.choice(pieces) for _ in range(rng.randint(1, 2)))
                         for _ in range(rng.randint(1, 9)))
        want = _tab_walking_back(text)
        got = [(d.line, d.col) for d in load_text(text, "w.yaml").diagnostics if d.code == "A44003"]
        assert got == want, repr(text)
