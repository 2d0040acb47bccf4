"""`Program`: a compiled expression (tree + closures) that evaluates activations and round-trips as IR."""

from __future__ import annotations

from typing import Any

from . import ast, evaluator
from .ast import Node
from .checker import referenced_roots
from .values import TYPES, Err, Value

IR_VERSION = 1


class EvalError(Exception):
    """The final result of an evaluation was an error value. `code` is one of the E_EXPR_* codes."""

    def __init__(self, code: str, message: str, offset: int = -1) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.offset = code, message, offset


class Program:
    __slots__ = ("text", "node", "_root", "roots")

    def __init__(self, text: str, node: Node) -> None:
        self.text = text
        self.node = node
        self._root = evaluator.build(node)
        # builtin type names (int, string...) resolve without a variable, so they are not roots
        self.roots: frozenset[str] = frozenset(r for r in referenced_roots(node) if r not in TYPES)

    def evaluate(self, activation: dict[str, Any] | None = None, *, budget: int = evaluator.DEFAULT_BUDGET,
                 deadline: float | None = None) -> Value:
        """Evaluate against `activation` (name -> JSON-like value). Returns the value; raises EvalError.
        `deadline` (time.monotonic()) stops a long evaluation with E_EXPR_COST."""
        result = self.evaluate_value(activation, budget=budget, deadline=deadline)
        if type(result) is Err:
            raise EvalError(result.code, result.message, result.offset)
        return result

    def evaluate_value(self, activation: dict[str, Any] | None = None, *, budget: int = evaluator.DEFAULT_BUDGET,
                       deadline: float | None = None) -> Value:
        """Like `evaluate` but returns an error as an `Err` value instead of raising (for callers that
        need CEL's own error-as-value view, such as the conformance runner)."""
        if activation is None:
            activation = {}
        elif not isinstance(activation, dict):
            return Err("E_EXPR_TYPE", "the activation must be a mapping of names to values")
        return evaluator.run(self._root, activation, budget, deadline)

    def to_ir(self) -> dict[str, Any]:
        return {"v": IR_VERSION, "cel": self.text, "ast": ast.to_json(self.node)}

    def __repr__(self) -> str:
        return f"Program({self.text!r})"


def load_program(ir: dict[str, Any]) -> Program:
    """Rebuild a Program from `to_ir()` output without re-parsing; falls back to the text if the tree is
    missing or malformed (IR written by another version). Raises ValueError if neither works."""
    if not isinstance(ir, dict) or not isinstance(ir.get("cel"), str):
        raise ValueError("expression IR must be a dict with a 'cel' text")
    if ir.get("v") == IR_VERSION and "ast" in ir:
        try:
            return Program(ir["cel"], ast.from_json(ir["ast"]))
        except (ValueError, TypeError, KeyError, AttributeError, IndexError):
            pass
    from .parser import SyntaxProblem, parse
    try:
        return Program(ir["cel"], parse(ir["cel"]))
    except SyntaxProblem as exc:
        raise ValueError(f"expression IR does not parse: {exc.message}") from None
