"""Plan the containers and their genealogy: seeds, split trees, merge sources, wafer roots.

At scale 1.0 (DOMAIN.md section 6): 72,000 seed lots reach TMTT, about 480 a day with a
weekly cycle, some outside the five-month window; 30,000 split parents form trees of depth
1-3 with 2-4 children each; 12,000 merge sources feed seeds through ``DW_MES_PJ_COMBINEDASSYLOTS``;
6,000 wafer roots are named in every lot's FIRSTNAME. Families are built over seeds in
time order, so a seed's ancestors are mostly its own and the trace set of the window is
about 95% of all containers (≈114,000).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from tracebus.trace.synth.clock import DAY, SEED_DAYS, SEED_FIRST_DAY, yymmdd
from tracebus.trace.synth.vocab import Vocab, cumulative

#: Container counts at scale 1.0.
BASE_COUNTS = {"seed": 72000, "split": 30000, "merge": 12000, "wafer": 6000}
_WEEKDAY_WEIGHTS = (1.0, 1.05, 1.1, 1.05, 1.0, 0.65, 0.55)


@dataclass(slots=True)
class Lot:
    """One planned container; ``anchor`` is the track-in time of its last route step."""

    cid: str
    name: str
    kind: str  # "seed", "split", "merge" or "wafer"
    anchor: int
    first_name: str = ""
    split_from: str | None = None
    original: str | None = None
    order: str = ""
    product: tuple = ()


@dataclass
class Plan:
    """The planned containers (in table order) and merge edges (source, target)."""

    lots: list[Lot] = field(default_factory=list)
    merges: list[tuple[Lot, Lot]] = field(default_factory=list)


class _Planner:
    def __init__(self, rng: random.Random, vocab: Vocab, scale: float):
        self.rng, self.vocab = rng, vocab
        self.n = {k: max(1, round(v * scale)) for k, v in BASE_COUNTS.items()}
        self.n["seed"] = max(8, self.n["seed"])
        self.cids: set[str] = set()
        self.per_day: dict[str, int] = {}
        self.orders = 0
        self.product_cum = cumulative(vocab.product_weights)

    def cid(self) -> str:
        while True:
            cid = f"{self.rng.getrandbits(64):016x}"
            if cid not in self.cids:
                self.cids.add(cid)
                return cid

    def name(self, prefix: str, t: int, child: int = 1) -> str:
        day = yymmdd(t)
        seq = self.per_day.get(day, 0) + 1
        self.per_day[day] = seq
        return f"{prefix}{day}{seq:04d}-A{child:02d}"

    def family(self, lot: Lot) -> None:
        """Give a lot a new work order and product."""
        self.orders += 1
        lot.order = f"WO{lot.name[2:6]}{self.orders:06d}"
        lot.product = self.rng.choices(self.vocab.products, cum_weights=self.product_cum)[0]

    def seed_times(self) -> list[int]:
        weights = [_WEEKDAY_WEIGHTS[(SEED_FIRST_DAY + d + 4) % 7] for d in range(SEED_DAYS)]
        days = self.rng.choices(range(SEED_DAYS), weights, k=self.n["seed"])
        return sorted((SEED_FIRST_DAY + d) * DAY + self.rng.randrange(DAY) for d in days)


def _seeds(p: _Planner, times: list[int]) -> list[Lot]:
    seeds = []
    for t in times:
        r = p.rng.random()
        prefix = "GC" if r < 0.05 else "GD" if r < 0.08 else "GA"
        lot = Lot(p.cid(), p.name(prefix, t), "seed", t)
        if prefix == "GD" and seeds:
            lot.original = seeds[-1].cid  # a rework lot remembers the lot it came from
        seeds.append(lot)
    return seeds


def _split_trees(p: _Planner, seeds: list[Lot]) -> list[Lot]:
    """Grow split trees over consecutive seeds, paced so the parents spread over all seeds."""
    parents: list[Lot] = []
    budget, total = p.n["split"], len(seeds)
    i = 0

    def grow(height: int, up: Lot | None) -> Lot:
        nonlocal i
        start = min(i, total - 1)
        anchor = seeds[start].anchor - (8 + 7 * (height - 1)) * DAY - p.rng.randrange(DAY)
        parent = Lot(p.cid(), p.name("GA", anchor), "split", anchor)
        parents.append(parent)
        if up is None:
            p.family(parent)
        else:
            parent.order, parent.product = up.order, up.product
        for k in range(1, p.rng.randint(2, 4) + 1):
            if height > 1 and p.rng.random() < 0.5 and len(parents) < budget:
                child = grow(height - 1, parent)
            elif i < total:
                child = seeds[i]
                child.order, child.product = parent.order, parent.product
                i += 1
            else:
                break
            child.split_from = parent.cid
            child.name = child.name[:-2] + f"{k:02d}"
        return parent

    while i < total:
        if len(parents) < budget and len(parents) * total <= budget * i:
            grow(p.rng.choices((1, 2, 3), (0.5, 0.3, 0.2))[0], None)
        else:
            p.family(seeds[i])
            i += 1
    return parents


def _wafers(p: _Planner, seeds: list[Lot], lots: list[Lot]) -> list[Lot]:
    """Create wafer roots and set FIRSTNAME of every lot from its time-local wafer."""
    count, total = p.n["wafer"], len(seeds)
    wafers = []
    for w in range(count):
        first = seeds[min(total - 1, w * total // count)]
        anchor = first.anchor - 40 * DAY - p.rng.randrange(DAY)
        wafer = Lot(p.cid(), p.name("PSW", anchor), "wafer", anchor)
        wafer.first_name = wafer.name
        p.family(wafer)
        wafers.append(wafer)
    by_cid = {lot.cid: lot for lot in lots}
    for idx, seed in enumerate(seeds):
        root = seed
        while root.split_from is not None:
            root = by_cid[root.split_from]
        if not root.first_name:  # the top of a family decides for the whole family
            root.first_name = wafers[idx * count // total].name
        seed.first_name = root.first_name
    for lot in lots:
        node = lot
        while not node.first_name and node.split_from is not None:
            node = by_cid[node.split_from]
        lot.first_name = lot.first_name or node.first_name or wafers[-1].name
    return wafers


def _merges(p: _Planner, seeds: list[Lot], wafers: list[Lot]) -> list[tuple[Lot, Lot]]:
    count, total = p.n["merge"], len(seeds)
    edges = []
    for m in range(count):
        target = seeds[min(total - 1, (m * total) // count + p.rng.randrange(max(1, total // count)))]
        anchor = target.anchor - 9 * DAY - p.rng.randrange(2 * DAY)
        source = Lot(p.cid(), p.name("GA", anchor), "merge", anchor)
        p.family(source)
        source.product = target.product
        wafer_idx = min(len(wafers) - 1, max(0, m * len(wafers) // count + p.rng.randrange(-2, 3)))
        source.first_name = wafers[wafer_idx].name
        edges.append((source, target))
    return edges


def plan(rng: random.Random, vocab: Vocab, scale: float) -> Plan:
    """Plan every container of one generation run.

    Args:
        rng: the run's random generator (consumed in a fixed order).
        vocab: the run's vocabularies.
        scale: 1.0 for the full dataset, 0.01 and 0.1 for tests.
    """
    p = _Planner(rng, vocab, scale)
    seeds = _seeds(p, p.seed_times())
    splits = _split_trees(p, seeds)
    wafers = _wafers(p, seeds, splits + seeds)
    merges = _merges(p, seeds, wafers)
    return Plan(lots=wafers + splits + [s for s, _ in merges] + seeds, merges=merges)
