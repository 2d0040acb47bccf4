"""Row summaries through real processes (§16, docs/rows.md): `a44 automation serve` runs a three-step YAML ETL and
its code twin; each run's summary counts every row once (first step's in, last step's out, errors summed), and
`runs`, `runs --format json` and `logs` show it."""

from __future__ import annotations

import json
import re

from tests.code.test_code_rows import ETL as CODE
from tests.e2e.support import Serve, a44, e2e_env
from tests.runtime.test_rows import ETL

CODE_ETL = CODE.replace('    await step.sleep("settle", "10s")\n', "")   # no sleep: one visit is enough here


def test_yaml_and_code_runs_summarise_their_rows_once_in_runs_and_logs(pg_url, tmp_path):
    (tmp_path / "etl.yaml").write_text(ETL)
    (tmp_path / "code_etl.py").write_text(CODE_ETL)
    env = e2e_env(tmp_path, database_url=pg_url, plugin=False)
    pub = a44("automation", "publish", "etl.yaml", "code_etl.py", env=env, cwd=tmp_path)
    assert pub.returncode == 0, pub.stdout + pub.stderr
    serve = Serve(env, tmp_path / "serve.log")
    try:
        ids = []
        for wf in ("etl", "code-etl"):
            run = a44("automation", "run", wf, "--input", '{"n": 10}', "-k", f"k-{wf}", "--wait", env=env,
                      cwd=tmp_path)
            assert run.returncode == 0, run.stdout + run.stderr + serve.output()
            ids.append(re.match(r"(run_[0-9A-Z]{26})", run.stdout).group(1))
        page = json.loads(a44("automation", "runs", "--format", "json", env=env, cwd=tmp_path).stdout)
        assert {r["run_id"]: r["rows"] for r in page["runs"]} == {i: {"in": 10, "out": 8, "error": 2} for i in ids}
        table = a44("automation", "runs", env=env, cwd=tmp_path).stdout
        assert "ROWS IN/OUT/ERR" in table and table.count(" 10/8/2 ") == 2, table
        for run_id in ids:
            logs = a44("automation", "logs", run_id, env=env, cwd=tmp_path).stdout
            line = next(x for x in logs.splitlines() if x.startswith("rows in/out/err: "))
            assert line.startswith("rows in/out/err: 10/8/2  (") and \
                {"extract 10/10/-", "transform 10/8/2", "load 8/8/-"} == set(line.split("(")[1][:-1].split(", ")), logs
    finally:
        serve.stop()
