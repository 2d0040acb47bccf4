"""The a44 test kit: the production engine in-process on virtual time, for a team's own workflow tests.

  env.py        Env: publish, run, advance, run_until_idle, runs and their attempts (the `a44_env` fixture)
  mocks.py      Ok / Fail scripts per attempt, recorded calls; the registry that fails unmocked connectors closed
  faults.py     kill_worker(after_effect_before_record), expire_lease, restart_postgres
  guard.py      the socket guard: only the test's PostgreSQL is reachable
  databases.py  one embedded PostgreSQL per test process, a migrated template, a clone per test
  plugin.py     the pytest plugin (fixtures `a44_postgres`, `a44_env`)
  yaml_tests.py `*.a44test.yaml` files: declarative tests (`a44 automation test DIR`)
  histories.py  a history of `runs export` run again under mocks answering as the far side did
Guide: docs/testkit.md.
"""

from .faults import WorkerKilled
from .mocks import Call, Fail, Ok

__all__ = ["Call", "Fail", "Ok", "WorkerKilled"]
