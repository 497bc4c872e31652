"""Time arithmetic of the generator: integer seconds from a fixed epoch, fast ISO formatting.

Timestamps are ints (seconds since :data:`EPOCH`) while generating and become ISO text
``YYYY-MM-DD HH:MM:SS`` only when a row is written; formatting through a precomputed table
of day prefixes is several times faster than ``datetime.strftime`` for millions of rows.
"""

from __future__ import annotations

from datetime import datetime, timedelta

EPOCH = datetime(2024, 6, 1)
DAY = 86400
HOUR = 3600
#: The five-month trace window of DOMAIN.md section 6, as [start, end) ISO texts.
WINDOW = ("2025-01-01 00:00:00", "2025-06-01 00:00:00")
#: Seeds reach TMTT on days [SEED_FIRST_DAY, SEED_FIRST_DAY + SEED_DAYS) after EPOCH, a few
#: days on each side of the window so that date filters have something to exclude.
SEED_FIRST_DAY = (datetime(2024, 12, 29) - EPOCH).days
SEED_DAYS = 157

_DAYS = tuple((EPOCH + timedelta(days=i)).strftime("%Y-%m-%d ") for i in range(900))


def iso(t: int | None) -> str | None:
    """Format seconds since :data:`EPOCH` as ISO text (None stays None)."""
    if t is None:
        return None
    d, s = divmod(t, DAY)
    h, s = divmod(s, HOUR)
    m, s = divmod(s, 60)
    return f"{_DAYS[d]}{h:02d}:{m:02d}:{s:02d}"


def yymmdd(t: int) -> str:
    """The ``yymmdd`` part of a container name for a time."""
    day = _DAYS[t // DAY]
    return day[2:4] + day[5:7] + day[8:10]
