"""Fixed vocabularies of the synthetic MES data: routes, workcenters, specs, machines, reasons.

Everything here is built from a dedicated ``random.Random`` so the vocabulary of a given
seed is the same at every scale. Workcenter names contain the real keywords of
DOMAIN.md section 5 so that the workcenter-group CASE of the sources and the station
filter of :func:`tracebus.trace.synth.cids` have something real to match.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

#: Workcenters per route group (group order of ``domains.WORKCENTER_GROUPS``); None is the
#: ungrouped wafer receiving step.
WORKCENTERS: dict[int | None, tuple[str, ...]] = {
    None: ("晶圓入庫",),
    0: ("切割_WS1", "切割_WS2"),
    1: ("焊接_DB", "焊接_DB2"),
    2: ("焊接_WB", "焊接_WB_CU"),
    3: ("焊接_DW",),
    4: ("成型", "成型_AUTO"),
    5: ("去膠",),
    6: ("水吹砂",),
    7: ("電鍍_掛鍍", "滾鍍", "條鍍"),
    8: ("移印", "移印_LASER"),
    9: ("切彎腳",),
    10: ("元件切割", "PKG_SAW"),
    11: ("TMTT", "測試_FT"),
}

#: Route of ancestors (split parents, merge sources) and of seeds, as group orders.
ANCESTOR_ROUTE: tuple[int, ...] = (0, 1, 2, 3, 4)
SEED_ROUTE: tuple[int, ...] = (5, 6, 7, 8, 9, 10, 11)
#: Groups whose steps consume materials.
MATERIAL_GROUPS = frozenset((1, 2, 3, 4))
TMTT_GROUP = 11

_NAMED_SPECS = {
    "焊接_DB": ("Epoxy D/B", "Eutectic D/B"),
    "焊接_WB": ("金線製程", "銅線製程"),
    "成型": ("Auto Mold", "Manual Mold"),
    "TMTT": ("TMTT-FT1", "TMTT-FT2"),
}
_MACHINE_PREFIX = {None: "IQC", 0: "SAW", 1: "DB", 2: "WB", 3: "DW", 4: "MD", 5: "DF", 6: "WJ",
                   7: "PL", 8: "MK", 9: "TF", 10: "PS", 11: "TT"}
_MACHINES_PER_GROUP = 50
SPECS_PER_WORKCENTER = 11
#: Spec index left out of the spec map, so rejects see NULL groups (then '(NA)' / 999).
UNMAPPED_SPEC_INDEX = SPECS_PER_WORKCENTER - 1

_REASONS_HEAD = ("外觀不良", "焊線偏移", "溢膠", "氣泡", "斷線", "短路", "開路", "腳歪", "電性不良",
                 "異物", "刮傷", "缺角", "印字不良", "鍍層不良", "尺寸不良")
_MATERIAL_KINDS = {1: ("EPOXY", "LF"), 2: ("AUW", "CUW"), 3: ("SOLDER", "CLIP"), 4: ("EMC", "PRE")}
_MATERIAL_TEXT = {"EPOXY": "銀膠 Ag epoxy", "LF": "導線架 Lead frame", "AUW": "金線 Au wire 1.0mil",
                  "CUW": "銅線 Cu wire 1.2mil", "SOLDER": "錫膏 Solder paste", "CLIP": "銅片 Cu clip",
                  "EMC": "封膠 Molding compound", "PRE": "預塑料 Pre-mold"}
#: Defect signal (DOMAIN.md section 6): machines, one per group, whose lots' descendants
#: reject more at TMTT, and the material kinds of which one part has a bad batch of lots.
BAD_MACHINE_GROUPS = (1, 2, 4)
BAD_MATERIAL_GROUPS = (2, 4)
_HOLD_REASONS = ("品質異常", "設備異常", "工程試作", "客戶要求", "待判", "MRB", "物料異常", "超時")
_DEPTS = ("PE", "QE", "EE", "MFG", "QA")
_JOB_MODELS = ("PM-DAILY", "PM-WEEKLY", "REPAIR", "CALIBRATION", "CLEAN")
_CODES = ("C01", "C02", "C03", "C04", "C05", "C06", "C07", "C08")


@dataclass(frozen=True)
class Station:
    """One workcenter with its machines and specs."""

    group: int | None
    workcenter: str
    specs: tuple[str, ...]
    machines: tuple[tuple[str, str], ...]  # (EQUIPMENTID, EQUIPMENTNAME)


@dataclass(frozen=True)
class Vocab:
    """All vocabularies one generation run uses."""

    stations: dict[int | None, tuple[Station, ...]]
    reasons: tuple[str, ...]
    reason_weights: tuple[float, ...]
    parts: dict[int, tuple[str, ...]]
    products: tuple[tuple[str, str, str, str, str], ...]  # name, line, type, function, bop
    product_weights: tuple[float, ...]
    bad_machines: frozenset[str] = frozenset()  # EQUIPMENTNAMEs
    bad_parts: frozenset[str] = frozenset()  # MATERIALPARTNAMEs with a bad batch of lots
    hold_reasons: tuple[str, ...] = _HOLD_REASONS
    depts: tuple[str, ...] = _DEPTS
    job_models: tuple[str, ...] = _JOB_MODELS
    codes: tuple[str, ...] = _CODES

    def spec_map(self) -> list[tuple]:
        """Rows of the DW_MES_SPEC_WORKCENTER_V view: SPEC, WORK_CENTER, group name, sequence.

        The sequence is text, as the view's VARCHAR2 column ('090' there): the group's
        order, zero-padded to three digits so that it sorts as text as it does as a number.
        """
        from tracebus.trace.domains import WORKCENTER_GROUPS
        rows = []
        for group, stations in self.stations.items():
            name, order = (WORKCENTER_GROUPS[group].name, f"{group:03d}") if group is not None else (None, None)
            for st in stations:
                for i, spec in enumerate(st.specs):
                    if i != UNMAPPED_SPEC_INDEX:
                        rows.append((spec, st.workcenter, name, order))
        return rows


def material_description(part: str) -> str:
    """MATERIALDESCRIPTION of a part: what its kind is, then the part name."""
    return f"{_MATERIAL_TEXT[part.split('-', 1)[0]]} {part}"


def _hex16(rng: random.Random) -> str:
    return f"{rng.getrandbits(64):016x}"


def _station(rng: random.Random, group: int | None, workcenter: str, serial: int) -> Station:
    named = _NAMED_SPECS.get(workcenter, ())
    specs = named + tuple(f"{workcenter}-S{i:02d}" for i in range(len(named), SPECS_PER_WORKCENTER))
    prefix = _MACHINE_PREFIX[group]
    count = _MACHINES_PER_GROUP // len(WORKCENTERS[group])
    machines = tuple((_hex16(rng), f"{prefix}-{serial + i:03d}") for i in range(count))
    return Station(group, workcenter, specs, machines)


def cumulative(weights) -> list[float]:
    """Cumulative weights, for ``Random.choices(cum_weights=...)`` in hot loops."""
    out, total = [], 0.0
    for w in weights:
        total += w
        out.append(total)
    return out


def _zipf(n: int, exponent: float) -> tuple[float, ...]:
    return tuple((i + 1) ** -exponent for i in range(n))


def build_vocab(seed: int) -> Vocab:
    """Build the vocabularies of one seed (independent of scale)."""
    rng = random.Random(f"vocab:{seed}")
    stations = {}
    for group, names in WORKCENTERS.items():
        stations[group] = tuple(
            _station(rng, group, wc, 1 + i * (_MACHINES_PER_GROUP // len(names)))
            for i, wc in enumerate(names))
    reasons = _REASONS_HEAD + tuple(f"LR{i:02d}-其他不良" for i in range(len(_REASONS_HEAD), 60))
    parts = {g: tuple(f"{kind}-{rng.randrange(1000, 9999)}{chr(65 + i % 26)}"
                      for i in range(19) for kind in kinds) for g, kinds in _MATERIAL_KINDS.items()}
    lines = tuple(f"PL-{c}" for c in "ABCDEFGHIJKLMNOPQRSTUVWXY")
    types = tuple(f"SOT-{23 + i}" if i % 2 else f"SOD-{123 + i}" for i in range(40))
    type_weights = _zipf(len(types), 1.0)
    products = []
    for i in range(300):
        pj_type = rng.choices(types, type_weights)[0]
        products.append((f"PD{i:04d}-{pj_type}", rng.choice(lines), pj_type,
                         rng.choice(("DIODE", "MOSFET", "BJT", "TVS", "ZENER")), f"BOP-{rng.randrange(1, 40):02d}"))
    # A separate generator, so the vocabulary above is the same as before the signal existed.
    pick = random.Random(f"defects:{seed}")
    bad_machines = frozenset(pick.choice([m for st in stations[g] for m in st.machines])[1]
                             for g in BAD_MACHINE_GROUPS)
    bad_parts = frozenset(pick.choice(parts[g]) for g in BAD_MATERIAL_GROUPS)
    return Vocab(stations=stations, reasons=reasons, reason_weights=_zipf(len(reasons), 1.2),
                 parts=parts, products=tuple(products), product_weights=_zipf(len(products), 0.8),
                 bad_machines=bad_machines, bad_parts=bad_parts)
