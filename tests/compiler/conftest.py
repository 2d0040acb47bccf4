"""Shared set-up of the compiler tests: the helper modules beside this file are importable by name
(`golden_support`), whatever import mode pytest uses."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
