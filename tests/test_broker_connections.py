"""The broker's producer and reader sockets never pile up, whatever runs them: gevent greenlets
(the API's default gunicorn worker, where a ``threading.local`` is per greenlet: they use the
pool, checked out per exchange) or threads that come and go (a socket per thread, closed with
it) (issue 24, finding 1).

Before, each greenlet or thread that sent a message kept a connection of its own for good,
counted against the pool's cap of 100: the API answered 503 "Too many connections" to every
submit after about a hundred callers.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

from tests.conftest_proc import ROOT
from tracebus.engine.message import Message

CALLERS = 300  # three times the pool's default cap


def _open_sockets(broker) -> int:
    """Connections the server has open (the suite's other clients included)."""
    return int(broker.client.info("clients")["connected_clients"])


def test_hundreds_of_short_lived_threads_share_a_handful_of_connections(broker):
    # Given 300 threads, 30 at a time, each started for one message and then gone
    broker.declare_queue("tests")
    before, errors = _open_sockets(broker), []

    def send(n):
        try:
            broker.enqueue(Message("tests", "record", (n,)))
        except Exception as e:  # noqa: BLE001 -- collected and asserted below
            errors.append(e)

    for start in range(0, CALLERS, 30):
        threads = [threading.Thread(target=send, args=(n,)) for n in range(start, start + 30)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    # Then every message went, and the threads' sockets closed with them
    assert errors == []
    assert broker.queue_stats("tests")["length"] == CALLERS
    assert _open_sockets(broker) - before <= 1
    assert broker.client.connection_pool._created_connections <= 2


def test_a_reader_gives_its_connection_back_after_each_fetch(broker):
    # Given 150 threads, one after the other, each reading one message of the queue (a message
    # is waiting for each: an empty read would wait out Redis's timer tick, 100 ms, each time)
    broker.declare_queue("tests")
    for n in range(150):
        broker.enqueue(Message("tests", "record", (n,)))
    before = _open_sockets(broker)
    read = []
    for _ in range(150):
        t = threading.Thread(target=lambda: read.extend(broker.fetch(["tests"], "c1", 1, 1)))
        t.start()
        t.join()
    assert len(read) == 150
    # Then each closed its socket as it ended
    assert _open_sockets(broker) - before <= 1


def test_closing_the_broker_closes_its_idle_sockets(settings):
    from tracebus.engine.broker import Broker

    broker = Broker(settings)
    broker.declare_queue("tests")
    before = _open_sockets(broker)
    broker.enqueue(Message("tests", "record", (1,)))
    assert _open_sockets(broker) == before + 1
    broker.close()
    other = Broker(settings)
    try:
        assert _open_sockets(other) == before  # the pool's (reopened here) and nothing else
    finally:
        other.close()


GEVENT_SCRIPT = textwrap.dedent("""
    from gevent import monkey; monkey.patch_all()
    import sys, gevent, gevent.pool
    from tracebus.engine.broker import Broker
    from tracebus.engine.message import Message
    from tracebus.engine.settings import Settings

    broker = Broker(Settings.from_env({"REDIS_URL": sys.argv[1], "TRACEBUS_KEY_PREFIX": sys.argv[2]}))
    broker.declare_queue("tests")
    before = int(broker.client.info("clients")["connected_clients"])

    def caller(n):
        gevent.sleep(0.001 * (n % 7))  # interleave, as concurrent requests do
        broker.enqueue(Message("tests", "record", (n,)))

    # 20 at a time, each call in a greenlet of its own, as a gevent worker serves requests
    pool = gevent.pool.Pool(20)
    jobs = [pool.spawn(caller, n) for n in range(int(sys.argv[3]))]
    gevent.joinall(jobs)
    failed = [repr(j.exception) for j in jobs if j.exception is not None]
    after = int(broker.client.info("clients")["connected_clients"])
    print(len(failed), after - before, failed[:1])
""")


def test_hundreds_of_greenlets_send_on_a_handful_of_sockets(settings, broker):
    # Given 300 greenlets of one process, 20 at a time, sending a message each (gevent's
    # thread-local is per greenlet)
    proc = subprocess.run([sys.executable, "-c", GEVENT_SCRIPT, settings.redis_url, settings.key_prefix,
                           str(CALLERS)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    failed, kept_open, first = proc.stdout.split(maxsplit=2)

    # Then none failed, and the pool's few sockets (20 at most) are all that stayed open
    assert failed == "0", first
    assert int(kept_open) <= 20
    assert broker.queue_stats("tests")["length"] == CALLERS
