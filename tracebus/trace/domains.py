"""Event domains, their output columns, the profiles that may ask for them, workcenter groups.

Pure data plus small pure functions; no I/O. Column names and their order are those the
original dashboard returned from Oracle (DOMAIN.md section 1), so a row produced by any
source is a tuple in exactly the order of :func:`columns`. The workcenter groups are the
ordered keyword table of DOMAIN.md section 5; the sources turn it into a SQL CASE and the
synthetic generator uses it to name workcenters.
"""

from __future__ import annotations

from typing import Iterable, Mapping, NamedTuple

from tracebus.errors import InvalidParams
from tracebus.trace.errors import InvalidProfile

#: Output columns of every domain, in the order the rows carry them.
COLUMNS: dict[str, tuple[str, ...]] = {
    "history": (
        "CONTAINERID", "WORKCENTERNAME", "EQUIPMENTID", "EQUIPMENTNAME", "SPECNAME",
        "TRACKINTIMESTAMP", "TRACKOUTTIMESTAMP", "TRACKINQTY", "TRACKOUTQTY", "FINISHEDRUNCARD",
        "PJ_WORKORDER", "CONTAINERNAME", "PJ_TYPE", "PJ_BOP", "WAFER_LOT_ID",
    ),
    "materials": (
        "CONTAINERID", "CONTAINERNAME", "MATERIALPARTNAME", "MATERIALLOTNAME", "QTYCONSUMED",
        "WORKCENTERNAME", "SPECNAME", "EQUIPMENTNAME", "TXNDATE",
        # Appended last (MSD needs it) so the positions of the columns above never move.
        "MATERIALDESCRIPTION",
    ),
    "rejects": (
        "CONTAINERID", "CONTAINERNAME", "WORKCENTERNAME", "WORKCENTER_GROUP",
        "WORKCENTERSEQUENCE_GROUP", "PRODUCTLINENAME", "PJ_FUNCTION", "PJ_TYPE", "PRODUCTNAME",
        "SPECNAME", "LOSSREASONNAME", "EQUIPMENTNAME", "REJECTCOMMENT", "REJECT_QTY",
        "STANDBY_QTY", "QTYTOPROCESS_QTY", "INPROCESS_QTY", "PROCESSED_QTY", "REJECT_TOTAL_QTY",
        "DEFECT_QTY", "TXN_TIME", "TXNDATE", "TXN_DAY",
    ),
    "holds": (
        "CONTAINERID", "CONTAINERNAME", "WORKCENTERNAME", "HOLDTXNDATE", "HOLDEMP",
        "HOLDEMPDEPTNAME", "HOLDREASONNAME", "HOLDCOMMENTS", "RELEASETXNDATE", "RELEASEEMP",
        "RELEASECOMMENTS", "NCRID", "HOLD_STATUS", "HOLD_HOURS",
    ),
    "jobs": (
        "JOBID", "RESOURCEID", "RESOURCENAME", "JOBSTATUS", "JOBMODELNAME", "JOBORDERNAME",
        "CREATEDATE", "COMPLETEDATE", "CAUSECODENAME", "REPAIRCODENAME", "SYMPTOMCODENAME",
        "CONTAINERIDS", "CONTAINERNAMES", "CONTAINERID",
    ),
    "upstream_history": (
        "CONTAINERID", "WORKCENTERNAME", "WORKCENTER_GROUP", "EQUIPMENTID", "EQUIPMENTNAME",
        "SPECNAME", "TRACKINTIMESTAMP", "TRACKINQTY",
    ),
    "downstream_rejects": (
        "CONTAINERID", "WORKCENTERNAME", "WORKCENTER_GROUP", "LOSSREASONNAME", "EQUIPMENTNAME",
        "REJECT_TOTAL_QTY", "TXNDATE",
    ),
}

#: Every domain, in the order of DOMAIN.md section 1.
DOMAINS: tuple[str, ...] = tuple(COLUMNS)

#: Domains each profile may request (DOMAIN.md section 5), and the ``params`` keys an events
#: request of each reads (the others are not stored with the job: the page sends every stage the
#: same params, so a container-mode events request also carries the seed stage's ``resolve_type``
#: and ``values``, which are dropped, not refused, and unknown keys cannot be used to store data
#: for the job's TTL). The kinds declare their profiles in their own folders
#: (:attr:`tracebus.trace.jobkind.JobKind.profile_domains`, ``profile_params``) and
#: :func:`tracebus.trace.kinds.register` fills these, in the order the kinds register.
PROFILES: dict[str, tuple[str, ...]] = {}
PARAM_KEYS: dict[str, frozenset[str]] = {}

#: Null (or blank) defaults of the rejects and downstream_rejects domains (docs/sources.md).
NA = "(NA)"
UNFILLED_REASON = "(未填寫)"
NO_SEQUENCE = 999


class WorkcenterGroup(NamedTuple):
    """One row of the workcenter group table: matched by case-insensitive substring."""

    order: int
    name: str
    keywords: tuple[str, ...]
    excludes: tuple[str, ...] = ()


#: Ordered table of DOMAIN.md section 5, keywords exactly as the original's
#: config/workcenter_groups.py lists its patterns (the first one is the station label, e.g.
#: 'TMTT' for 測試); the first group that matches (after its exclusions) wins, no match means
#: NULL group and sequence :data:`NO_SEQUENCE`.
WORKCENTER_GROUPS: tuple[WorkcenterGroup, ...] = (
    WorkcenterGroup(0, "切割", ("切割",), ("元件切割", "PKG_SAW")),
    WorkcenterGroup(1, "焊接_DB", ("焊接_DB", "焊_DB_料", "焊_DB")),
    WorkcenterGroup(2, "焊接_WB", ("焊接_WB", "焊_WB_料", "焊_WB")),
    WorkcenterGroup(3, "焊接_DW", ("焊接_DW", "焊_DW", "焊_DW_料")),
    WorkcenterGroup(4, "成型", ("成型", "成型_料")),
    WorkcenterGroup(5, "去膠", ("去膠",)),
    WorkcenterGroup(6, "水吹砂", ("水吹砂",)),
    WorkcenterGroup(7, "電鍍", ("掛鍍", "滾鍍", "條鍍", "電鍍", "補鍍", "TOTAI", "BANDL")),
    WorkcenterGroup(8, "移印", ("移印",)),
    WorkcenterGroup(9, "切彎腳", ("切彎腳",)),
    WorkcenterGroup(10, "元件切割", ("元件切割", "PKG_SAW")),
    WorkcenterGroup(11, "測試", ("TMTT", "測試")),
)
#: The MSD page's default detection station (its seed-resolve stage and its analysis alike).
DEFAULT_STATION = "測試"
#: The directions of a lineage: towards a lot's ancestors, or its descendants.
DIRECTIONS = ("backward", "forward")
#: Longest date-mode window, in days from start to end, of the seed-resolve stage and the MSD
#: events job alike: the original's ``MAX_QUERY_DAYS`` (mid_section_defect_service.py at
#: 1d3f4282, MSD.md section 1.6), which its ``_validate_date_range`` applies to both. It was 180
#: at dbe0da05, the commit DOMAIN.md section 5 read.
MAX_RANGE_DAYS = 730


def columns(domain: str) -> tuple[str, ...]:
    """Return the output columns of a domain.

    Raises:
        InvalidParams: the domain is unknown.
    """
    try:
        return COLUMNS[domain]
    except (KeyError, TypeError):
        raise InvalidParams(f"unknown domain {domain!r}; known: {', '.join(DOMAINS)}") from None


def allowed_domains(profile: str) -> tuple[str, ...]:
    """Return the domains a profile may request.

    Raises:
        InvalidProfile: the profile is unknown.
    """
    try:
        return PROFILES[profile]
    except (KeyError, TypeError):
        raise InvalidProfile(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}") from None


def known_params(profile, params):
    """``params`` reduced to the keys ``profile`` reads (:data:`PARAM_KEYS`); anything that is
    not an object, or of an unknown profile, is returned as it is for the validation to refuse."""
    keys = PARAM_KEYS.get(profile) if isinstance(profile, str) else None
    if keys is None or not isinstance(params, Mapping):
        return params
    return {k: v for k, v in params.items() if k in keys}


def validate(profile: str, domains: Iterable[str]) -> list[str]:
    """Check a request's profile and domains; return the domains deduplicated, order kept.

    Args:
        profile: the request's profile name.
        domains: the requested domains; must be non-empty.

    Raises:
        InvalidProfile: unknown profile, or a domain the profile does not allow.
        InvalidParams: an unknown domain, a non-string, or no domains at all.
    """
    allowed = allowed_domains(profile)
    if isinstance(domains, str):
        raise InvalidParams("domains must be a list of domain names, not a string")
    wanted = list(dict.fromkeys(domains))
    if not wanted:
        raise InvalidParams("domains must name at least one domain")
    for domain in wanted:
        columns(domain)
        if domain not in allowed:
            raise InvalidProfile(
                f"profile {profile!r} does not allow domain {domain!r}; allowed: {', '.join(allowed)}")
    return wanted


def workcenter_group(workcenter: str | None) -> WorkcenterGroup | None:
    """Return the group of a workcenter name, or None when no group matches."""
    if not workcenter:
        return None
    name = workcenter.upper()
    for group in WORKCENTER_GROUPS:
        if any(x.upper() in name for x in group.excludes):
            continue
        if any(k.upper() in name for k in group.keywords):
            return group
    return None


def station_group(station: str) -> WorkcenterGroup:
    """Return the group a station name refers to: by group name or by one of its keywords.

    An unknown station yields an ad-hoc group whose only keyword is the station itself.
    """
    wanted = station.upper()
    for group in WORKCENTER_GROUPS:
        if wanted == group.name.upper() or wanted in (k.upper() for k in group.keywords):
            return group
    return WorkcenterGroup(NO_SEQUENCE, station, (station,))


def station_options() -> list[dict]:
    """The MSD station dropdown: every group as ``{name, label, order}`` in group order.

    ``label`` is the group's first keyword, as the original's ``query_station_options``.
    """
    return [{"name": g.name, "label": g.keywords[0], "order": g.order} for g in WORKCENTER_GROUPS]


def normalize_stations(station: str | Iterable[str] | None) -> list[WorkcenterGroup]:
    """Parse an MSD ``station`` parameter into its groups, sorted by name and deduplicated.

    Args:
        station: ``"g1,g2"``, a list of names, or None/empty for :data:`DEFAULT_STATION`.
            A name is a group name or one of its keywords ('TMTT' is 測試).

    Raises:
        InvalidParams: a name matches no group (the original rejects unknown stations).
    """
    if station is not None and not isinstance(station, (str, list, tuple)):
        raise InvalidParams(f"station must be a string or a list of strings, got {type(station).__name__}")
    names = station.split(",") if isinstance(station, str) else list(station or [])
    wanted = sorted({n.strip() for n in names if isinstance(n, str) and n.strip()}) or [DEFAULT_STATION]
    groups: dict[str, WorkcenterGroup] = {}
    for name in wanted:
        group = station_group(name)
        if group.order == NO_SEQUENCE:
            raise InvalidParams(f"unknown station {name!r}; known: {', '.join(g.name for g in WORKCENTER_GROUPS)}")
        groups[group.name] = group
    return [groups[n] for n in sorted(groups)]
