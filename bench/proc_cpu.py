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


def pid_cpu_s(pid: int) -> float:
    """user + system CPU seconds of one process so far (0 once it is gone)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU seconds the whole machine spent not idle (all cores, /proc/stat): what every process used."""
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = f[3] + (f[4] if len(f) > 4 else 0)       # idle + iowait
    return (sum(f[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    """user + system CPU seconds of this process so far."""
    t = os.times()
    return t.user + t.system
