"""Generate the equipment tables: DW_MES_RESOURCE and its daily status hours, DW_MES_RESOURCESTATUS_SHIFT.

Every machine of the vocabulary (the EQUIPMENTIDs of the history and the RESOURCEIDs of
DW_MES_JOB) is one resource, so every query-tool equipment-period type reads the same tools.
Each resource has, per day of :data:`DAYS`, one to three status rows (NEWSTATUSNAME one of
:data:`STATUSES`, HISTORYID = RESOURCEID, TXNDATE the shift's start) whose HOURS, in quarter
hours (sums are exact in binary floating point, so any summation order agrees), add to 24.
One resource in :data:`_IDLE_EVERY` is idle (only NST and EGT), so its OU% is NULL.
The rows come from their own seeded generator: the other tables are the same with or without them.
"""

from __future__ import annotations

import random
from bisect import bisect
from datetime import datetime
from typing import Iterator

from tracebus.trace.synth.clock import DAY, EPOCH, iso
from tracebus.trace.synth.vocab import Vocab, cumulative

STATUSES = ("PRD", "SBY", "UDT", "SDT", "EGT", "NST")
_WEIGHTS = (0.55, 0.2, 0.08, 0.06, 0.05, 0.06)
_IDLE = ("NST", "EGT")
_IDLE_EVERY = 40
#: Days with status rows: [2024-12-01, 2025-06-10), around the trace window.
DAYS = range((datetime(2024, 12, 1) - EPOCH).days, (datetime(2025, 6, 10) - EPOCH).days)
_SHIFT_START = 7 * 3600 + 1800  # 07:30


def resources(vocab: Vocab) -> list[tuple[str, str]]:
    """(RESOURCEID, RESOURCENAME) of every machine, in vocabulary order."""
    return [m for group in vocab.stations.values() for station in group for m in station.machines]


def status_rows(seed: int, machines: list[tuple[str, str]]) -> Iterator[tuple]:
    """(HISTORYID, NEWSTATUSNAME, TXNDATE, HOURS) rows of every machine and day."""
    rng = random.Random(f"resources:{seed}")
    rand, randint = rng.random, rng.randint
    days = [iso(day * DAY + _SHIFT_START) for day in DAYS]
    busy, idle = cumulative(_WEIGHTS), cumulative((0.5, 0.5))
    for index, (eq_id, _) in enumerate(machines):
        names, cum = (_IDLE, idle) if index % _IDLE_EVERY == _IDLE_EVERY - 1 else (STATUSES, busy)
        top = cum[-1]
        for when in days:
            r = rand()
            n = 1 if r < 0.3 else 2 if r < 0.75 else 3
            picked = list(dict.fromkeys(names[bisect(cum, rand() * top)] for _ in range(n)))
            left, later = 96, len(picked) - 1  # quarter hours of the day; statuses after this one
            for status in picked[:-1]:
                quarters = randint(1, left - later)  # leaves at least one for each later status
                left, later = left - quarters, later - 1
                yield eq_id, status, when, quarters / 4
            yield eq_id, picked[-1], when, left / 4
