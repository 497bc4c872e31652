"""Generate the event rows of one planned container: history, materials, rejects, holds, jobs.

Densities follow DOMAIN.md sections 1 and 6: about 10 history rows per container (seeds pass
groups 5-11 and end at TMTT, ancestors pass groups 0-4, wafer roots one receiving step),
about 5% partial track-out duplicates and 3% NULL EQUIPMENTID; materials only at 焊接_* and
成型; rejects on 65% of lots with a Pareto reason mix and lognormal quantities, heaviest at
TMTT; holds on about 5% of lots; equipment jobs naming 1-5 recently processed lots.
Rows are appended to per-table lists that the caller flushes to SQLite.

The defect signal MSD looks for: a lot that passed one of ``vocab.bad_machines`` or consumed
a lot of a bad batch (lots 2.. of each of ``vocab.bad_parts``) is *tainted*, and so are its
split children and merge targets; a tainted seed rejects more often and
:data:`_TAINT_FACTOR` times more per reject at TMTT, so its TMTT reject rate is about 4-5x.
"""

from __future__ import annotations

import math
import random
from collections import deque

from tracebus.trace.synth.clock import HOUR, iso
from tracebus.trace.synth.lineage import Lot
from tracebus.trace.synth.vocab import (ANCESTOR_ROUTE, MATERIAL_GROUPS, SEED_ROUTE, TMTT_GROUP, Vocab, cumulative, material_description)

_ROUTES = {"seed": SEED_ROUTE, "split": ANCESTOR_ROUTE, "merge": ANCESTOR_ROUTE, "wafer": (None,)}
_REPEATS = {"seed": ((1, 2), (0.6, 0.4)), "split": ((1, 2, 3), (0.3, 0.45, 0.25)),
            "merge": ((1, 2, 3), (0.3, 0.45, 0.25)), "wafer": ((1, 2), (0.5, 0.5))}
_P_PARTIAL = 0.05
_P_NULL_EQUIPMENT = 0.03
_P_NULL_TRACKIN = 0.003
_P_REJECTS = 0.65
_P_REJECTS_TAINTED = 0.85
_TAINT_FACTOR = 3.5
_P_WORKFLOW = 0.9
_P_HOLD = 0.05
_P_JOB = 0.0225
_LN_TRACKIN = math.log(20000)
_LN_REJECT = math.log(5)


class EventGenerator:
    """Turns planned lots into rows; owns the per-table buffers and the cross-lot state."""

    def __init__(self, rng: random.Random, vocab: Vocab, merge_sources: dict[str, list[str]],
                 bad_batch: int = 3):
        """Args: ``merge_sources`` maps a merge target CID to its source CIDs; ``bad_batch``
        is the number of bad lots of each bad part (lots 2 .. 1 + bad_batch)."""
        self.rng, self.vocab = rng, vocab
        self.merge_sources, self.bad_batch = merge_sources, bad_batch
        self.rows: dict[str, list[tuple]] = {t: [] for t in (
            "DW_MES_LOTWIPHISTORY", "DW_MES_LOTMATERIALSHISTORY", "DW_MES_LOTREJECTHISTORY",
            "DW_MES_HOLDRELEASEHISTORY", "DW_MES_JOB", "DW_MES_WIP")}
        self.tainted: set[str] = set()
        self.lots_opened: dict[str, int] = {}  # part -> material lots opened so far
        self.reason_cum = cumulative(vocab.reason_weights)
        self.spec_cum = cumulative([0.6 ** i for i in range(len(vocab.stations[0][0].specs))])
        self.material_lots: dict[str, list] = {}  # part -> [lot name, uses left]
        self.recent: deque[tuple[str, str]] = deque(maxlen=8)
        self.serial = 0

    def lot(self, lot: Lot) -> None:
        """Generate every event row of one container."""
        steps = self._steps(lot)
        self._history(lot, steps)
        bad = any(s[2][1] in self.vocab.bad_machines for s in steps)
        for step in steps:
            if step[0].group in MATERIAL_GROUPS:
                bad = self._materials(lot, step) or bad
        parents = self.merge_sources.get(lot.cid, []) + [lot.split_from]
        if bad or any(p in self.tainted for p in parents):
            self.tainted.add(lot.cid)
        tainted = lot.kind == "seed" and lot.cid in self.tainted
        if lot.kind == "seed" and self.rng.random() < _P_WORKFLOW:
            name, line, pj_type, _, bop = lot.product
            self.rows["DW_MES_WIP"].append((lot.cid, lot.name, f"WF-{pj_type}-{bop}", line))
        if self.rng.random() < (_P_REJECTS_TAINTED if tainted else _P_REJECTS):
            self._rejects(lot, steps, _TAINT_FACTOR if tainted else 1.0)
        if self.rng.random() < _P_HOLD:
            self._holds(lot, steps)
        self.recent.append((lot.cid, lot.name))

    def _steps(self, lot: Lot) -> list[tuple]:
        """Route steps (station, spec, machine, track-in, track-out, qty in, qty out), in time order."""
        rng, stations = self.rng, self.vocab.stations
        counts, weights = _REPEATS[lot.kind]
        groups = []
        for group in _ROUTES[lot.kind]:
            groups.extend([group] * rng.choices(counts, weights)[0])
        steps, t_in = [], lot.anchor
        for group in reversed(groups):  # walk back from the last track-in
            gap = 2 * HOUR + rng.randrange(22 * HOUR)
            station = rng.choice(stations[group])
            spec = rng.choices(station.specs, cum_weights=self.spec_cum)[0]
            t_out = t_in + min(1800 + rng.randrange(6 * HOUR), gap - 600)
            steps.append([station, spec, rng.choice(station.machines), t_in, t_out])
            t_in -= gap
        steps.reverse()
        qty = int(math.exp(rng.gauss(_LN_TRACKIN, 0.45)))
        for step in steps:
            out = qty - int(qty * rng.random() * 0.01)
            step.extend((qty, out))
            qty = out
        return steps

    def _history(self, lot: Lot, steps: list) -> None:
        rng, out = self.rng, self.rows["DW_MES_LOTWIPHISTORY"].append
        for station, spec, (eq_id, eq_name), t_in, t_out, q_in, q_out in steps:
            if rng.random() < _P_NULL_EQUIPMENT:
                eq_id = None
            runcard = f"RC-{lot.name}" if station.group == TMTT_GROUP else None
            if rng.random() < _P_NULL_TRACKIN:
                out((lot.cid, station.workcenter, eq_id, eq_name, spec, None, None, q_in, None,
                     runcard, lot.order))
                continue
            tin = iso(t_in)
            if rng.random() < _P_PARTIAL:  # an earlier partial track-out of the same track-in
                early = None if rng.random() < 0.2 else iso(t_in + (t_out - t_in) // 2)
                out((lot.cid, station.workcenter, eq_id, eq_name, spec, tin, early, q_in,
                     q_out // 2, runcard, lot.order))
            out((lot.cid, station.workcenter, eq_id, eq_name, spec, tin, iso(t_out), q_in, q_out,
                 runcard, lot.order))
            if rng.random() < _P_JOB:
                self._job(station, (eq_id, eq_name), t_out, lot)

    def _materials(self, lot: Lot, step: list) -> bool:
        """Consume materials at one step; True when one of them is a bad lot."""
        rng, out = self.rng, self.rows["DW_MES_LOTMATERIALSHISTORY"].append
        station, spec, (_, eq_name), t_in, t_out = step[:5]
        bad = False
        for _ in range(2 if rng.random() < 0.25 else 1):
            part = rng.choice(self.vocab.parts[station.group])
            current = self.material_lots.get(part)
            if current is None or current[1] == 0:
                self.serial += 1
                opened = self.lots_opened[part] = self.lots_opened.get(part, 0) + 1
                is_bad = part in self.vocab.bad_parts and 2 <= opened < 2 + self.bad_batch
                current = self.material_lots[part] = [f"{part}-L{self.serial:07d}", rng.randint(10, 30), is_bad]
            current[1] -= 1
            bad = bad or current[2]
            qty = int(math.exp(rng.gauss(5.0, 0.6)))
            out((lot.cid, part, current[0], qty, station.workcenter, spec, eq_name,
                 iso(t_in + rng.randrange(max(1, t_out - t_in))), material_description(part)))
        return bad

    def _small_qty(self) -> int | None:
        r = self.rng.random()
        return 0 if r < 0.85 else None if r < 0.9 else self.rng.randint(1, 20)

    def _rejects(self, lot: Lot, steps: list, tmtt_factor: float) -> None:
        rng, out, v = self.rng, self.rows["DW_MES_LOTREJECTHISTORY"].append, self.vocab
        count = min(40, max(1, round(math.exp(rng.gauss(1.2, 0.8)))))
        tmtt = [s for s in steps if s[0].group == TMTT_GROUP]
        for _ in range(count):
            step = rng.choice(tmtt) if tmtt and rng.random() < 0.5 else rng.choice(steps)
            station, spec, (_, eq_name), t_in, t_out = step[:5]
            reason = None if rng.random() < 0.02 else rng.choices(v.reasons, cum_weights=self.reason_cum)[0]
            comment = f"{reason or ''} 檢出".strip() if rng.random() < 0.1 else None
            defect = int(math.exp(rng.gauss(1.1, 0.8))) if rng.random() < 0.2 else None
            factor = tmtt_factor if station.group == TMTT_GROUP else 1.0
            out((lot.cid, station.workcenter, spec, reason, None if rng.random() < 0.02 else eq_name,
                 comment, max(1, int(factor * math.exp(rng.gauss(_LN_REJECT, 1.0)))), self._small_qty(),
                 self._small_qty(), self._small_qty(), self._small_qty(), defect,
                 iso(t_in + rng.randrange(max(1, t_out - t_in)))))

    def _holds(self, lot: Lot, steps: list) -> None:
        rng, out, v = self.rng, self.rows["DW_MES_HOLDRELEASEHISTORY"].append, self.vocab
        for _ in range(1 if rng.random() < 0.7 else 2):
            station, _, _, t_in, t_out = rng.choice(steps)[:5]
            held = t_in + rng.randrange(max(1, t_out - t_in))
            released = None if rng.random() < 0.03 else held + int(math.exp(rng.gauss(math.log(6 * HOUR), 1.0)))
            self.serial += 1
            out((lot.cid, station.workcenter, iso(held), f"E{rng.randrange(10000, 99999)}", rng.choice(v.depts),
                 rng.choice(v.hold_reasons), "待工程判定" if rng.random() < 0.5 else None, iso(released),
                 None if released is None else f"E{rng.randrange(10000, 99999)}",
                 None if released is None else "OK 放行",
                 f"NCR-{self.serial:07d}" if rng.random() < 0.3 else None))

    def _job(self, station, machine: tuple, t_out: int, lot: Lot) -> None:
        rng, v = self.rng, self.vocab
        eq_id, eq_name = machine
        if eq_id is None:
            eq_id, eq_name = station.machines[0]
        cids = names = None
        if rng.random() < 0.6:
            others = rng.randint(0, 4)
            picked = [(lot.cid, lot.name)] + (list(self.recent)[-others:] if others else [])
            picked = list(dict.fromkeys(picked))
            cids, names = ",".join(c for c, _ in picked), ",".join(n for _, n in picked)
        created = t_out + rng.randrange(4 * HOUR)
        done = None if rng.random() < 0.1 else created + rng.randrange(HOUR, 12 * HOUR)
        self.serial += 1
        self.rows["DW_MES_JOB"].append((
            f"{rng.getrandbits(64):016x}", eq_id, eq_name, "Open" if done is None else "Complete",
            rng.choice(v.job_models), f"JO{self.serial:08d}", iso(created), iso(done),
            rng.choice(v.codes), rng.choice(v.codes), rng.choice(v.codes), cids, names))
