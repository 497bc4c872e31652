"""Periodic actors for the scheduler tests (imported by real supervisors on queue ``periodic``).

Each run counts itself under the tick it was sent for (the ``scheduled_at`` option), so a
test sees whether any tick ran twice or not at all.
"""

from __future__ import annotations

from tracebus import actor, get_broker
from tracebus.engine.worker import current_message


def _count(name: str) -> None:
    tick = int(current_message().options["scheduled_at"])
    broker = get_broker()
    broker.client.hincrby(f"{broker.keys.prefix}:test:{name}", tick, 1)


@actor(queue="periodic", schedule="* * * * * *")  # every second (croniter's sixth field)
def every_second():
    _count("ticks")


@actor(queue="periodic")
def from_file(label):
    _count(f"file:{label}")
