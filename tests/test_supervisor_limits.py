"""The supervisor's limits on real worker processes: recycling by RSS and by message count,
the hard and soft time limits, and the heartbeat timeout."""

from __future__ import annotations

import os

from tests import actors


def test_a_worker_past_the_rss_limit_is_recycled_and_its_message_counted_once(supervisor):
    # Given one worker (about 30 MB) limited to 60 MB
    pool = supervisor("--max-rss-mb", "60", processes=1)
    client, prefix = pool.broker.client, pool.broker.keys.prefix
    [pid] = pool.workers()
    # When a message makes it hold 64 MB more
    actors.hog.send(1, 64)
    # Then the worker is replaced once the message is done, and the message ran once
    pool.wait(lambda: client.hget(f"{prefix}:test:runs", 1), 10, "hog to run")
    [new_pid] = pool.wait_workers(1, without={pid})
    actors.record.send(2)
    pool.wait(lambda: client.hget(f"{prefix}:test:runs", 2), 10, "record to run")
    assert client.smembers(f"{prefix}:test:pids") == {str(new_pid).encode()}
    assert client.hget(f"{prefix}:test:runs", 1) == b"1"
    pool.wait_queue()
    assert "recycled for RSS" in pool.log()


def test_workers_recycle_on_memory_by_default(supervisor):
    # Given one worker started with no memory setting at all (issue 40: a request that left a
    # worker at 545 MB kept it there for every later unit)
    pool = supervisor(processes=1)
    client, prefix = pool.broker.client, pool.broker.keys.prefix
    [pid] = pool.workers()
    # When a message leaves it holding 420 MB, past the default TRACEBUS_WORKER_MAX_RSS_MB (384)
    actors.hog.send(1, 420)
    # Then it is replaced once the message is done
    pool.wait(lambda: client.hget(f"{prefix}:test:runs", 1), 10, "hog to run")
    pool.wait_workers(1, without={pid})
    pool.wait_queue()
    assert "recycled for RSS" in pool.log()


def test_a_worker_is_recycled_after_max_jobs_and_every_message_runs_once(supervisor):
    # Given one worker recycled after 5 messages (plus a jitter of at most 1)
    pool = supervisor("--max-jobs", "5", processes=1)
    client, prefix = pool.broker.client, pool.broker.keys.prefix
    # When it is sent 20 messages at once
    actors.record.send_many([(n,) for n in range(20)])
    # Then they all ran exactly once, in at least four successive processes
    pool.wait(lambda: client.hlen(f"{prefix}:test:runs") == 20, 15, "20 messages to run")
    pool.wait_queue()
    assert set(client.hvals(f"{prefix}:test:runs")) == {b"1"}
    assert client.scard(f"{prefix}:test:pids") >= 4
    assert "recycled after max jobs" in pool.log()


def test_a_message_past_its_hard_time_limit_gets_its_worker_killed_then_dead_lettered(supervisor):
    # Given an actor that blocks SIGALRM (so the soft limit cannot stop it), with a 0.2 s
    # limit (a hard kill 1.22 s in, with a grace of 1 s instead of the default 5 s) and
    # max_deliveries=2
    pool = supervisor(processes=2, TRACEBUS_HARD_TIME_LIMIT_GRACE_SECONDS="1")
    broker, client, prefix = pool.broker, pool.broker.client, pool.broker.keys.prefix
    message = actors.stuck.send(1)
    # Then its worker is SIGKILLed twice by the supervisor, and the message is dead-lettered
    pool.wait(lambda: broker.queue_stats("tests")["dead"] == 1, 25, "the message to be dead-lettered")
    [dead] = broker.dead_entries("tests")
    assert dead["reason"] == "killed by SIGKILL: past its message's hard time limit"
    assert dead["deliveries"] == 2
    assert dead["payload"] == message.encode()
    assert client.hget(f"{prefix}:test:attempts", 1) == b"2"
    # And the killed workers were replaced
    pool.wait_workers(2)
    assert pool.log().count("past its message's hard time limit") >= 2
    pool.wait_queue(dead=1)


def test_a_message_past_its_soft_time_limit_raises_and_follows_the_retry_policy(supervisor):
    # Given one worker and a message with a 0.3 s limit that sleeps 5 s, allowed one retry
    pool = supervisor(processes=1)
    broker, client, prefix = pool.broker, pool.broker.client, pool.broker.keys.prefix
    [pid] = pool.workers()
    actors.overruns.send_with_options(args=(1,), max_retries=1, min_backoff_ms=50, max_backoff_ms=50)
    # Then TimeLimitExceeded interrupts it twice, and it is dead-lettered by the retry policy
    pool.wait(lambda: broker.queue_stats("tests")["dead"] == 1, 10, "the message to be dead-lettered")
    [dead] = broker.dead_entries("tests")
    assert dead["reason"].startswith("gave up after 1 retries: TimeLimitExceeded: time limit exceeded\n")
    assert client.hget(f"{prefix}:test:attempts", 1) == b"2"
    assert client.hget(f"{prefix}:test:runs", 1) is None
    # And the worker process was not killed for it
    assert pool.workers() == {pid}
    pool.wait_queue(dead=1)


def test_a_worker_that_stops_heartbeating_is_killed_and_replaced(supervisor):
    # Given a 2 s heartbeat timeout and one worker
    pool = supervisor(processes=1, TRACEBUS_HEARTBEAT_TIMEOUT_SECONDS="2")
    broker, client, prefix = pool.broker, pool.broker.client, pool.broker.keys.prefix
    [pid] = pool.workers()
    # When it runs an actor (max_deliveries=1) that sleeps 30 s without heartbeating
    actors.silent.send(1, 30)
    pool.wait(lambda: client.hget(f"{prefix}:test:started", 1), 10, "silent to start")
    # Then the supervisor kills it and starts another worker
    pool.wait_workers(1, without={pid})
    # And the message is dead-lettered with the reason
    pool.wait(lambda: broker.queue_stats("tests")["dead"] == 1, 5, "the message to be dead-lettered")
    assert broker.dead_entries("tests")[0]["reason"] == "killed: no heartbeat for 2s"
    # And the new worker takes work
    actors.record.send(2)
    pool.wait(lambda: client.hget(f"{prefix}:test:runs", 2), 10, "record to run")
    pool.wait_queue(dead=1)


def test_workers_run_at_the_configured_lower_cpu_priority(supervisor):
    # Given a supervisor told to nice its workers by 7
    pool = supervisor(processes=2, TRACEBUS_WORKER_NICE="7")
    # Then every worker runs 7 nice levels below the supervisor (the API keeps the CPU first)
    base = os.getpriority(os.PRIO_PROCESS, pool.process.pid)

    def niceness():  # a child renices itself right after the fork: wait for both to have
        return [os.getpriority(os.PRIO_PROCESS, pid) for pid in pool.workers()]

    pool.wait(lambda: len(niceness()) == 2 and min(niceness()) > base, 5, "both workers to renice")
    assert niceness() == [base + 7] * 2
