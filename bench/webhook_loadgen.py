"""Open-loop HTTP/1.1 load generator for the webhook bench (bench/bench_webhooks.py).

Cheap on purpose, so that it does not steal the CPU it measures (the bench shares 2 cores with PostgreSQL and the
server): every request is signed *before* the run (timestamps are "now", well within the 300 s window; distinct
idempotency keys), serialized to raw bytes, and sent over keep-alive connections by a bare asyncio Protocol (no
HTTP client library, no HMAC at send time).

Open loop / no coordinated omission: request i is due at start + i/rate whatever happened to the earlier ones; its
latency is measured from that due time (not from when a connection became free), so a server that stalls is charged
for the whole queue that builds up behind the stall, as wrk2 does. A due request takes an idle keep-alive connection
or opens a new one (at most `max_conns`; beyond that it waits, and the wait counts in its latency).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

from anthares44.automation.runtime.ingestion.webhooks import sign


def presign(host: str, port: int, path: str, secret: str, n: int, tag: str, body_pad: int = 0) -> list[bytes]:
    """n signed POSTs as raw HTTP/1.1 request bytes, each with its own idempotency key."""
    ts = str(int(time.time()))
    pad = "x" * body_pad
    out = []
    for i in range(n):
        body = json.dumps({"i": i, "tag": tag, "order": {"id": f"ord_{i}", "pad": pad}}).encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                f"A44-Timestamp: {ts}\r\nA44-Signature: {sign(secret, ts, body)}\r\n"
                f"A44-Idempotency-Key: {tag}:{i}\r\nContent-Length: {len(body)}\r\n\r\n")
        out.append(head.encode("ascii") + body)
    return out


class _Conn(asyncio.Protocol):
    def __init__(self, gen: _Gen):
        self.gen, self.buf, self.transport, self.pending = gen, bytearray(), None, None  # pending: (due, future)
        self.closed = False

    def connection_made(self, transport):
        self.transport = transport

    def send(self, data: bytes, fut: asyncio.Future) -> None:
        self.pending = fut
        self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while self.pending is not None:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end]).decode("latin-1")
            length, close = 0, False
            for line in head.split("\r\n")[1:]:
                k, _, v = line.partition(":")
                k = k.strip().lower()
                if k == "content-length":
                    length = int(v)
                elif k == "connection" and v.strip().lower() == "close":
                    close = True
            if len(self.buf) < end + 4 + length:
                return
            status = int(head[9:12])
            del self.buf[:end + 4 + length]
            fut, self.pending = self.pending, None
            if not fut.done():
                fut.set_result(status)
            if close:
                self.closed = True
                self.transport.close()
            else:
                self.gen.release(self)

    def connection_lost(self, exc) -> None:
        self.closed = True
        if self.pending is not None and not self.pending.done():
            self.pending.set_exception(ConnectionError(f"connection lost: {exc}"))
        self.gen.forget(self)


@dataclass
class _Gen:
    host: str
    port: int
    max_conns: int
    idle: list = field(default_factory=list)
    open: int = 0
    waiters: asyncio.Queue | None = None

    def release(self, conn: _Conn) -> None:
        self.idle.append(conn)
        if self.waiters is not None and not self.waiters.empty():
            self.waiters.get_nowait().set_result(None)

    def forget(self, conn: _Conn) -> None:
        self.open -= 1
        if conn in self.idle:
            self.idle.remove(conn)
        if self.waiters is not None and not self.waiters.empty():
            self.waiters.get_nowait().set_result(None)

    async def acquire(self) -> _Conn:
        while True:
            while self.idle:
                conn = self.idle.pop()
                if not conn.closed:
                    return conn
            if self.open < self.max_conns:
                self.open += 1
                try:
                    _, conn = await asyncio.get_running_loop().create_connection(lambda: _Conn(self), self.host,
                                                                                 self.port)
                except BaseException:
                    self.open -= 1
                    raise
                return conn
            w = asyncio.get_running_loop().create_future()
            await self.waiters.put(w)
            await w


async def run_open_loop(host: str, port: int, requests: list[bytes], rate: float, *, max_conns: int = 2000,
                        timeout: float = 30.0) -> dict:
    """Send `requests` at `rate` per second (open loop); latencies in ms from each request's due time."""
    gen = _Gen(host, port, max_conns, waiters=asyncio.Queue())
    loop = asyncio.get_running_loop()
    lat: list[float] = []
    statuses: dict[int, int] = {}
    errors: dict[str, int] = {}
    last_done = [0.0]

    async def one(due: float, data: bytes) -> None:
        try:
            conn = await gen.acquire()
            fut = loop.create_future()
            conn.send(data, fut)
            status = await asyncio.wait_for(fut, timeout)
            statuses[status] = statuses.get(status, 0) + 1
        except Exception as exc:  # noqa: BLE001 - counted, the run goes on
            name = type(exc).__name__
            errors[name] = errors.get(name, 0) + 1
            return
        now = time.perf_counter()
        last_done[0] = max(last_done[0], now)
        lat.append((now - due) * 1000)

    tasks = []
    start = time.perf_counter() + 0.05
    for i, data in enumerate(requests):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0.0005:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one(due, data)))
    send_end = time.perf_counter()
    await asyncio.gather(*tasks)
    for c in gen.idle:
        c.transport.close()
    lat.sort()
    n = len(requests)
    elapsed = max(last_done[0], send_end) - start
    q = (lambda p: round(lat[min(len(lat) - 1, int(p * len(lat)))], 2)) if lat else (lambda p: None)
    return {"target_rps": rate, "sent": n, "offered_rps": round(n / max(1e-9, send_end - start), 1),
            "achieved_rps": round(len(lat) / max(1e-9, elapsed), 1),
            "p50_ms": q(0.50), "p90_ms": q(0.90), "p99_ms": q(0.99), "max_ms": round(lat[-1], 2) if lat else None,
            "statuses": {str(k): v for k, v in sorted(statuses.items())}, "errors": errors,
            "connections": gen.open}
