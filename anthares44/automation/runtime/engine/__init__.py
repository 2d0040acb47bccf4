"""The interpreter daemon: leases, the interpreter, retries, compensation, the state machine.

Modules (one job each):
  states.py        run states, allowed transitions (enforced by the SQL in queries/interpreter.sql)
  progress.py      where a run stands, rebuilt from its attempt rows
  journal.py       one transaction per step transition, behind the lease fence
  invoke.py        one connector call under the step timeout
  interpreter.py   RunDriver: keeps the lease of one visit, builds its context, runs its strategy
  visit.py         the visit's context, the strategy / step-kind protocols, the endings both strategies share
  strategies.py    the one registry of strategies (by IR kind) and step kinds (by node kind)
  dag_visit.py     the DAG strategy (YAML); dag_steps.py its calls and records; sleeps.py the `sleep` step kind
  code_visit.py    the code strategy (Python workflows, §12)
  saga.py          the saga's way back
  confirmation.py  resolve_confirmation: a person decides an interrupted exclusive step (§7.3)
  worker.py        Engine: claim, drive, run_once (what tests and the daemon call)
  daemon.py        WorkerSettings, Daemon: the serve loop, LISTEN/NOTIFY wake-ups, graceful shutdown
"""

from .confirmation import OUTCOMES, resolve_confirmation
from .daemon import Daemon, WorkerSettings
from .states import RUN_TRANSITIONS, allowed_from, is_legal
from .worker import Engine

__all__ = ["Engine", "Daemon", "WorkerSettings", "resolve_confirmation", "OUTCOMES", "RUN_TRANSITIONS",
           "allowed_from", "is_legal"]
