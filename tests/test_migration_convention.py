"""The rolling-upgrade convention of migrations (docs/store.md "Rolling upgrades"), read from the migration files, no
database: while two daemon releases serve one database, the older one keeps calling the functions and reading the
columns it knows. So a migration may not redefine (`create or replace`) or drop a function an earlier migration
created with the same signature, nor drop or rename a table, view, type or column, nor change a column's type,
unless its header carries the destructive mark (`-- destructive: WHAT; needs daemons >= schema N`, compat.py): new
behaviour goes to a new name (`lease_claim_v2`) or a new signature, the code calls that, the old one stays until a
marked migration drops it. A redefinition that older daemons cannot tell apart (a new branch only a newer daemon
reaches) may stay in place when the header says so and why: `-- in place: automation.f(args); WHY`. Dropping a
trigger counts as destructive too: it takes an AccessExclusiveLock on a table the older daemons are writing (a
deadlock with their reads, seen in tests/rolling). The history written before the convention is listed in
GRANDFATHERED, exactly."""

from __future__ import annotations

import re

from anthares44.automation.runtime.store.compat import destructive_mark
from anthares44.automation.runtime.store.vocabulary import Migration, load_migrations

# (migration, what it did in place) before the convention (0044): releases before schema 42 are not run beside newer
# ones (the baseline row of automation.schema_compat says so)
GRANDFATHERED = {
    (6, "redefines automation.notify_run_event()"),
    (6, "redefines automation.notify_run_due()"),
    (12, "redefines automation.metric_attempt_finished()"),
    (15, "redefines automation.promote_partition_next()"),
    (26, "redefines automation.engine_commit_many(jsonb, text)"),
    (27, "redefines automation.lease_claim(text, timestamptz, integer, interval, timestamptz)"),
    (28, "redefines automation.engine_commit(text, text, integer, text, timestamptz, jsonb)"),
    (28, "redefines automation.engine_op_run_transition(jsonb)"),
    (30, "redefines automation.engine_op_run_transition(jsonb)"),
    (31, "redefines automation.engine_op_partition_plan(jsonb)"),
    (35, "redefines automation.engine_op_wait_check(jsonb)"),
    (37, "redefines automation.run_cancel(text, text, text, text, boolean, text, timestamptz)"),
    (39, "redefines automation.lease_claim(text, timestamptz, integer, interval, timestamptz)"),
    (42, "redefines automation.lease_claim(text, timestamptz, integer, interval, timestamptz)"),
}

_COMMENT = re.compile(r"--[^\n]*")
_STRING = re.compile(r"'(?:[^']|'')*'")
_CREATE = re.compile(r"\bcreate\s+(or\s+replace\s+)?function\s+([\w.\"]+)\s*\(")
_DROP_FUNCTION = re.compile(r"\bdrop\s+function\s+(?:if\s+exists\s+)?([\w.\"]+)")
_DESTRUCTIVE = {
    "drops a table": re.compile(r"\bdrop\s+table\b"),
    "drops a view": re.compile(r"\bdrop\s+(?:materialized\s+)?view\b"),
    "drops a type": re.compile(r"\bdrop\s+type\b"),
    "drops a column": re.compile(r"\bdrop\s+column\b"),
    "renames": re.compile(r"\brename\s+(?:to|column)\b|\brename\s+\w+\s+to\b"),
    "changes a column's type": re.compile(r"\balter\s+column\s+\w+\s+(?:set\s+data\s+)?type\b"),
    "drops a trigger": re.compile(r"\bdrop\s+trigger\b"),
}
_IN_PLACE = re.compile(r"^--\s*in place:\s*(?P<fn>[\w.]+\([^)]*\))\s*;\s*(?P<why>\S.*)$", re.I)


def in_place_marks(m: Migration) -> set[str]:
    """The redefinitions the migration's header declares harmless to older daemons, as `redefines FN`."""
    marks = set()
    for line in m.sql.splitlines():
        if not line.startswith("--"):
            break
        hit = _IN_PLACE.match(line.strip())
        if hit:
            marks.add(f"redefines {hit.group('fn').lower()}")
    return marks
_MODES = {"in", "out", "inout", "variadic"}
_TYPE_FIRST_WORDS = {"double", "timestamp", "character", "time", "bit", "interval"}


def _args(text: str, start: int) -> str:
    """The text inside the parentheses opened just before `start`."""
    depth, i = 1, start
    while depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    return text[start:i - 1]


def _signature(args: str) -> str:
    """The identity of a function's arguments, as PostgreSQL matches them: types of the in arguments."""
    types, depth, part = [], 0, ""
    for ch in args + ",":
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            words = re.split(r"\s+(?:default\b|=).*", part.strip(), maxsplit=1, flags=re.S)[0].split()
            if words and words[0] in _MODES:
                mode, words = words[0], words[1:]
                if mode == "out":
                    words = []
            if len(words) > 1 and words[0] not in _TYPE_FIRST_WORDS:
                words = words[1:]
            if words:
                types.append(" ".join(words))
            part = ""
        else:
            part += ch
    return ", ".join(types)


def in_place_changes(migrations: tuple[Migration, ...]) -> list[tuple[int, str]]:
    """Every (migration, change) that breaks a daemon of an older schema still running."""
    seen: set[str] = set()
    found = []
    for m in migrations:
        text = _STRING.sub("''", _COMMENT.sub("", m.sql.lower()))
        for what, pattern in _DESTRUCTIVE.items():
            found += [(m.number, what)] * bool(pattern.search(text))
        for d in _DROP_FUNCTION.finditer(text):
            found.append((m.number, f"drops {d.group(1)}"))
        for c in _CREATE.finditer(text):
            fn = f"{c.group(2).replace(chr(34), '')}({_signature(_args(text, c.end()))})"
            if fn in seen:
                found.append((m.number, f"redefines {fn}"))
            seen.add(fn)
    return found


def test_no_migration_changes_in_place_what_an_older_daemon_calls_unless_marked_destructive():
    migrations = load_migrations()
    marked = {m.number for m in migrations if destructive_mark(m) is not None}
    declared = {(m.number, what) for m in migrations for what in in_place_marks(m)}
    changes = [c for c in in_place_changes(migrations) if c[0] not in marked and c not in declared]
    stale = declared - set(in_place_changes(migrations))
    assert not stale, f"in-place marks with no redefinition behind them: {sorted(stale)}"
    unlisted = sorted(set(changes) - GRANDFATHERED)
    assert not unlisted, (
        f"these migrations change in place what a daemon of an older schema still calls: {unlisted}; add a new "
        "function (lease_claim_v2, or a new signature) and keep the old one, or mark the migration "
        "`-- destructive: WHAT; needs daemons >= schema N` (docs/store.md \"Rolling upgrades\")")
    assert not GRANDFATHERED - set(changes), f"stale GRANDFATHERED entries: {sorted(GRANDFATHERED - set(changes))}"


def test_the_guard_sees_a_redefinition_a_drop_and_a_rename_and_accepts_a_v2_and_a_new_signature():
    first = Migration(1, "0001_a", "create function automation.claim(p_worker text, p_n integer default 5)\n"
                                   "    returns int language sql as $$ select 1 $$;")
    again = Migration(2, "0002_b", "create or replace function automation.claim(w text, n integer)\n"
                                   "    returns int language sql as $$ select 2 $$;\n"
                                   "create function automation.claim_v2(p_worker text) returns int\n"
                                   "    language sql as $$ select 3 $$;\n"
                                   "create or replace function automation.claim(p_worker text, p_n integer, "
                                   "p_lease interval) returns int language sql as $$ select 4 $$;")
    gone = Migration(3, "0003_c", "drop function automation.claim(text, integer);\n"
                                  "alter table automation.runs rename column state to status;\n"
                                  "alter table automation.runs drop column x;\n"
                                  "select 'drop table quoted';")
    assert in_place_changes((first, again, gone)) == [
        (2, "redefines automation.claim(text, integer)"), (3, "drops a column"), (3, "renames"),
        (3, "drops automation.claim")]
    marked = Migration(3, "0003_c", "-- 0003_c: the old claim goes\n"
                                    "-- destructive: drops automation.claim(text, integer); needs daemons >= schema 2\n"
                                    + gone.sql)
    mark = destructive_mark(marked)
    assert mark is not None and mark.min_daemon == 2 and mark.what == "drops automation.claim(text, integer)"
    assert destructive_mark(gone) is None
    trig = Migration(4, "0004_d", "drop trigger t on automation.step_attempts;")
    assert in_place_changes((trig,)) == [(4, "drops a trigger")]
    declared = Migration(2, "0002_b", "-- 0002_b: claim learns a branch\n"
                                      "-- in place: automation.claim(text, integer); only schema 2 reaches it\n"
                                      + again.sql)
    assert in_place_marks(declared) == {"redefines automation.claim(text, integer)"}
    assert in_place_marks(again) == set()


def test_every_destructive_mark_parses():
    """A mark misspelt would pass for an additive migration: then the guard above names its changes, but a mark
    with no change behind it would raise no one's attention, so each `-- destructive:` line must parse."""
    for m in load_migrations():
        lines = [line for line in m.sql.splitlines() if line.lower().startswith("-- destructive:")]
        assert not lines or destructive_mark(m) is not None, (
            f"{m.name}: {lines[0]!r} is not `-- destructive: WHAT; needs daemons >= schema N`")
