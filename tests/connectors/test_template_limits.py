"""Rendering limits of the bounded sandbox: each limit stops its blow-up quickly with E_TEMPLATE_LIMIT naming the
limit (never a MemoryError, never minutes of CPU); ordinary templates are unaffected; the deadline stops a
rendering that is within every count limit but too slow for its step."""

from __future__ import annotations

import time

import pytest

from anthares44.automation.errors import CODES, E_TEMPLATE_LIMIT, A44Error
from anthares44.automation.runtime.render import make_scope, render_params, render_value

SCOPE = make_scope(input={"n": 20_000, "s": "ab", "l": [1, 2], "w": 999_999})


@pytest.mark.parametrize("text, limit", [
    ("{% for i in range(input.n) %}{% for j in range(input.n) %}{% endfor %}{% endfor %}", "loop iterations"),
    ("{{ range(200000) | list }}", "range"),
    ("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", "output size"),
    ("{{ 'x' * 2000000 }}", "repetition"),
    ("{{ input.l * 100000 }}", "repetition"),
    ("{{ ('x' * 900000) + ('x' * 900000) }}", "concatenation size"),
    ("{{ '%999999d' % 1 }}", "format width"),
    ("{{ '%*d' % (input.w, 1) }}", "format width"),
    ("{{ '%.999999f' | format(1.5) }}", "format width"),
    ("{{ '{:>999999}'.format(1) }}", "format width"),
    ("{{ '{:>{w}}'.format(1, w=input.w) }}", "format width"),
    ("{{ 'a' | center(99999999) }}", "format width"),
    ("{{ 'x'.ljust(10 ** 8) }}", "format width"),
    ("{{ ('a\n' * 400000) | indent(1000) }}", "padding result size"),
    ("{{ ('a' * 1000) | replace('a', 'a' * 1000) | replace('a', 'a' * 1000) }}", "replace result size"),
    ("{{ [1] | batch(10 ** 8, 0) | list }}", "batch size"),
    ("{{ 2 ** 100000000 }}", "power"),
    ("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
     "namespace value size"),
    ("{% macro f(s, n) %}{{ f(s ~ s, n - 1) if n else s | length }}{% endmacro %}{{ f('a', 40) }}",
     "macro argument size"),
    ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(1) }}", "nesting"),
])
def test_each_limit_stops_its_blowup_with_its_code(text, limit):
    t = time.monotonic()
    with pytest.raises(A44Error) as exc:
        render_value(text, SCOPE)
    assert exc.value.code == E_TEMPLATE_LIMIT, exc.value.message
    assert f"passed the {limit} limit" in exc.value.message
    assert time.monotonic() - t < 5


def test_the_limit_code_is_permanent():
    assert CODES[E_TEMPLATE_LIMIT].retryable is False


def test_ordinary_templates_render_as_before():
    assert render_value("{% for i in range(3) %}{{ loop.index }}/{{ loop.length }} {% endfor %}", SCOPE) == \
        "1/3 2/3 3/3 "
    assert render_value("{{ '%5d|%s' % (3, 'x') }} {{ '{:>4}'.format(1) }} {{ range(3) | join(',') }}", SCOPE) == \
        "    3|x    1 0,1,2"
    assert render_value("{{ input.s * 3 }}", SCOPE) == "ababab"
    assert render_value("{{ input.l * 2 }}", SCOPE) == [1, 2, 1, 2]
    assert render_value("{% set ns = namespace(t=0) %}{% for i in range(10) %}{% set ns.t = ns.t + i %}"
                        "{% endfor %}{{ ns.t }}", SCOPE) == "45"


def test_one_budget_covers_all_the_templates_of_a_step():
    # each template alone stays under the iteration limit; together they pass it
    loop = {"$tpl": "{% for i in range(100000) %}{% endfor %}"}
    assert render_params(loop, SCOPE) == ""
    with pytest.raises(A44Error) as exc:
        render_params({"a": [loop] * 11}, SCOPE)
    assert "loop iterations" in exc.value.message


def test_the_deadline_stops_a_rendering_within_the_count_limits():
    slow = {"$tpl": "{% for i in range(1000) %}{% for j in range(900) %}{% endfor %}{% endfor %}"}
    t = time.monotonic()
    with pytest.raises(A44Error) as exc:
        render_params(slow, SCOPE, deadline=time.monotonic() + 0.01)
    assert exc.value.code == E_TEMPLATE_LIMIT and "time limit" in exc.value.message
    assert time.monotonic() - t < 1
