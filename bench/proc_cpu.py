"""CPU seconds of processes from /proc (helper of bench_runtime.py and runtime_dbos.py)."""

import os
from pathlib import Path


def pg_cpu_s(postmaster: int) -> float:
    """CPU seconds of the PostgreSQL server: its live processes plus what exited children left in cutime/cstime."""
    tck, total = os.sysconf("SC_CLK_TCK"), 0.0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            f = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(d.name), int(f[1])
        if pid == postmaster:
            total += (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / tck
        elif ppid == postmaster:
            total += (int(f[11]) + int(f[12])) / tck
    return total


def own_cpu_s() -> float:
    """user + system CPU seconds of this process so far."""
    t = os.times()
    return t.user + t.system
