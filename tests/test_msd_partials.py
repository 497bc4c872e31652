"""The MSD units' partials as typed records (issue 27, item 3), stored as they always were.

A partial is committed with its unit and read by the units of later stages, possibly by a
worker of the next deploy: the records pack to the msgpack maps with the short keys the units
wrote before them, and read those maps back.
"""

from __future__ import annotations

import msgpack

from tracebus.trace.msd import lots
from tracebus.trace.msd.job.partials import DetailPartial, DetectionPartial, EventsPartial, FoldKeys


def _map(raw: bytes) -> dict:
    return msgpack.unpackb(raw, raw=False, strict_map_key=False)


def test_each_partial_packs_to_the_map_the_units_always_stored_and_reads_it_back():
    part = {"det": {"days": {"2025-01-02": [1, 2]}}}
    assert _map(DetectionPartial(part).pack()) == {"p": part}
    fold = FoldKeys(3 * lots.ID_SPAN, ["m\x1fM1"], {"A": [0]}, {"A": [0]}, {})
    events = EventsPartial.with_fold(part, 42, fold)
    stored = _map(events.pack())
    assert stored["p"] == part and stored["rows"] == 42 and _map(stored["keys"]) == list(fold)
    assert EventsPartial.unpack(events.pack()).fold() == fold
    assert _map(EventsPartial(part, 7).pack()) == {"p": part, "rows": 7}
    sort = {"lot": [0], "lots": ["L1"], "reason": [0], "reasons": ["R"], "v": [[1]]}
    backward = DetailPartial(sort, [["f", "", "", [], 1]], part, [["m\x1fM1", 1, 2, 3]], ["EQ1"])
    assert _map(backward.pack()) == {"sort": sort, "cells": [["f", "", "", [], 1]], "p": part,
                                     "keys": [["m\x1fM1", 1, 2, 3]], "eqid": ["EQ1"]}
    assert DetailPartial.unpack(backward.pack()) == backward
    forward = DetailPartial(sort, [])
    assert _map(forward.pack()) == {"sort": sort, "cells": []}
    assert DetailPartial.unpack(forward.pack()) == forward


def test_a_partial_written_before_the_records_reads_the_same():
    old_events = msgpack.packb({"p": {"ev": {}}, "rows": 5}, use_bin_type=True)
    assert EventsPartial.unpack(old_events) == EventsPartial({"ev": {}}, 5, None)
    old_detail = msgpack.packb({"sort": {}, "cells": [], "p": {}, "keys": [], "eqid": ["E"]}, use_bin_type=True)
    assert DetailPartial.unpack(old_detail).eqid == ["E"]


def test_a_node_record_is_stored_as_the_detail_pages_read_it():
    fold = lots.NodeFold(["A"], None)
    fold.fold(["CONTAINERID", "WORKCENTER_GROUP", "EQUIPMENTNAME", "EQUIPMENTID"], [["A", "DB", "M1", "E1"]])
    assert fold.records["A"].machines == ["DB\x1fM1"]
    assert fold.records["A"].stored() == {"m": ["DB\x1fM1"], "t": []}
