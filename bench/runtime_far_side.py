"""The far side of the benchmark's HTTP workflow (helper of bench_runtime.py): an aiohttp server on 127.0.0.1
answering `POST /step/<name>` with a small JSON document at once. It runs as its own process, so its CPU is
neither the daemon's nor PostgreSQL's; it prints its port on stdout when it listens.

    python bench/runtime_far_side.py
"""

import asyncio
import subprocess
import sys

from aiohttp import web


async def step(request: web.Request) -> web.Response:
    await request.read()
    return web.json_response({"ok": True, "step": request.match_info["name"]})


async def main() -> None:
    app = web.Application()
    app.router.add_post("/step/{name}", step)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    print(site._server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()


class FarSide:
    """The HTTP workflow's far side, bench/runtime_far_side.py, in a process of its own."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, __file__],
                                     stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
