"""`compile_expression`: text -> (Program | None, issues). The one entry point the compiler uses."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from . import codes
from .checker import Checker
from .parser import SyntaxProblem, parse
from .program import Program


@dataclass(frozen=True)
class ExprIssue:
    code: str
    severity: str          # 'error' | 'warning'
    message: str
    offset: int            # 0-based character offset inside the expression text
    length: int
    hint: str | None = None


@dataclass
class CompileResult:
    program: Program | None
    issues: list[ExprIssue] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.program is not None


def compile_expression(text: str, *, roots: set[str] | None = None, step_ids: Collection[str] | None = None,
                       expect_bool: bool = False, fields: dict[str, dict[str, str]] | None = None) -> CompileResult:
    """Parse, check and compile `text`. Never raises for a user's mistake: problems become issues. `fields`
    types the fields of roots with a fixed shape (`{"rows": {"in": "int", ...}}`)."""
    if not isinstance(text, str):
        return CompileResult(None, [ExprIssue(codes.SYNTAX, "error", "expression must be a string", 0, 0)])
    try:
        node = parse(text)
    except SyntaxProblem as exc:
        code = codes.TOO_COMPLEX if exc.code == "limit" else codes.SYNTAX
        return CompileResult(None, [ExprIssue(code, "error", exc.message, exc.offset, exc.length)])
    checker = Checker(text, roots, step_ids, fields)
    result_type = checker.run(node)
    issues = [ExprIssue(f.code, "error", f.message, f.offset, f.length, f.hint) for f in checker.findings]
    if expect_bool and result_type is not None and result_type != "bool":
        issues.append(ExprIssue(codes.NOT_BOOL, "error",
                                f"expected a boolean expression, found one of type {result_type}", 0,
                                len(text), "compare the value, e.g. `x > 0` or `x == 'done'`"))
    issues.sort(key=lambda i: (i.offset, i.code))
    if any(i.severity == "error" for i in issues):
        return CompileResult(None, issues)
    return CompileResult(Program(text, node), issues)


def compile_unchecked(text: str) -> CompileResult:
    """Parse and compile without the checker (CEL's `disable_check`): for tests and tools only."""
    try:
        node = parse(text)
    except SyntaxProblem as exc:
        code = codes.TOO_COMPLEX if exc.code == "limit" else codes.SYNTAX
        return CompileResult(None, [ExprIssue(code, "error", exc.message, exc.offset, exc.length)])
    return CompileResult(Program(text, node), [])
