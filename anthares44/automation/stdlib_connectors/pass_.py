"""`uses: pass` (§3.5b): no external effect; the step result is its `output`, already rendered by the interpreter
(like Step Functions' Pass state), so steps can reshape data between other steps."""

from __future__ import annotations

from typing import Any

from ..compiler.models.params import PassParams
from .protocol import StepContext


class PassConnector:
    name = "pass"
    params_model = PassParams

    async def invoke(self, params: Any, ctx: StepContext) -> Any:
        # tolerate the unvalidated mapping too, so an embedder that skips validate_params gets the same result
        if isinstance(params, dict):
            return params.get("output")
        return params.output
