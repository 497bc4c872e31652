"""A middleware that makes every message take a while: the browser tests watch a job's progress
move and cancel it mid-run, which a scale-0.01 sample's units (milliseconds each) would not allow.

Installed in real workers with ``TRACEBUS_MIDDLEWARE=tests.slow_units:SlowUnits``; the pause is
``TEST_SLOW_UNIT_SECONDS`` (default 0.3).
"""

from __future__ import annotations

import os
import time

import tracebus


class SlowUnits(tracebus.Middleware):
    def __init__(self):
        self.seconds = float(os.environ.get("TEST_SLOW_UNIT_SECONDS", "0.3"))

    def before_process(self, worker, actor, message) -> None:
        time.sleep(self.seconds)
