"""Slow and idle HTTP clients, the load of issue 12's "slow clients stall the API".

:class:`SlowClients` keeps ``slow`` connections sending a request's headers one byte every
``interval_s`` and ``idle`` connections that connected and send nothing, all from one thread
(a selector would add nothing: each tick writes one byte per slow connection). A connection
the server closes (its header deadline) is opened again at the next tick, so the pressure
stays at ``slow + idle`` open connections for as long as the context lasts. Used by the
``api-slow-clients`` scenario and by tests/test_api_slow_clients.py.
"""

from __future__ import annotations

import socket
import threading
import time

#: The request a slow client dribbles: padded so it never completes at one byte per tick.
_HEAD = b"GET /healthz HTTP/1.1\r\nHost: tracebus\r\nX-Pad: " + b"p" * 4000 + b"\r\n\r\n"


class SlowClients:
    """``slow`` byte-a-tick and ``idle`` silent connections to ``host:port``, while in a ``with``.

    Attributes:
        opened(int): connections opened so far (first ones and reopened ones).
        closed_by_server(int): connections the server closed (seen as a failed send or EOF).
    """

    def __init__(self, host: str, port: int, slow: int, idle: int, interval_s: float = 0.2):
        self.address, self.slow, self.idle, self.interval_s = (host, port), slow, idle, interval_s
        self.opened = self.closed_by_server = 0
        #: open connections after each tick (the load actually applied)
        self.open_samples: list[int] = []
        self._socks: list[socket.socket | None] = [None] * (slow + idle)
        self._sent = [0] * (slow + idle)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slow-clients", daemon=True)

    def __enter__(self) -> "SlowClients":
        self._tick()  # every connection is open before the caller measures anything
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for s in self._socks:
            if s is not None:
                s.close()

    def open_now(self) -> int:
        """Connections currently open."""
        return sum(s is not None for s in self._socks)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._tick()

    def _tick(self) -> None:
        for i, s in enumerate(self._socks):
            if s is not None and self._server_closed(s):
                s.close()
                self.closed_by_server += 1
                s = self._socks[i] = None
            try:
                if s is None:  # reopened in the same tick: the load never dips
                    s = self._socks[i] = socket.create_connection(self.address, timeout=5)
                    s.setblocking(False)
                    self._sent[i] = 0
                    self.opened += 1
                if i < self.slow:
                    pos = self._sent[i] % len(_HEAD)
                    s.send(_HEAD[pos:pos + 1])
                    self._sent[i] += 1
            except OSError:  # refused, reset or full: dropped, tried again next tick
                if s is not None:
                    s.close()
                    self.closed_by_server += 1
                self._socks[i] = None
        self.open_samples.append(self.open_now())

    @staticmethod
    def _server_closed(s: socket.socket) -> bool:
        try:
            s.recv(1, socket.MSG_PEEK)  # EOF, or an answer to a request never finished: it is over
            return True
        except BlockingIOError:
            return False
        except OSError:
            return True


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile of ``values`` by nearest rank (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def probe(get, count: int, interval_s: float) -> tuple[list[float], list[str]]:
    """Call ``get()`` (one request, returning its HTTP status) ``count`` times, ``interval_s``
    apart; returns (latencies in seconds of the 200s, descriptions of the failures)."""
    latencies, failures = [], []
    for _ in range(count):
        t0 = time.perf_counter()
        try:
            status = get()
        except OSError as e:
            failures.append(f"{type(e).__name__}: {e}")
        else:
            if status == 200:
                latencies.append(time.perf_counter() - t0)
            else:
                failures.append(f"HTTP {status}")
        time.sleep(interval_s)
    return latencies, failures
