"""A query job's answer written as a stream (issue 40, item 4): the rows each unit sorts in the
worker, merged in order and decoded a slice at a time, make the same document as the answer
built whole, for every statement, its post included (the lots' collapse and pages, the status
hours' totals), with NULLs, ties and partial track-outs that span units."""

from __future__ import annotations

import random

import orjson
import pytest

from tracebus.jobs.chunkcodec import DecodeError, encode_chunk, stream_rows
from tracebus.trace.query import answers
from tracebus.trace.query.equipment import EQUIPMENT_PERIOD


def _pieces(data: bytes, size: int):
    return (data[at:at + size] for at in range(0, len(data), size))


@pytest.mark.parametrize("compress", [False, True])
def test_a_chunk_read_in_slices_gives_its_rows(compress):
    rows = [[n, f"lot-{n % 17}" * (n % 5), None if n % 3 else n / 7] for n in range(3000)]
    data = encode_chunk(["a", "b", "c"], rows, compress=compress)
    assert data[0] == int(compress)
    for size in (1, 7, 4096, len(data)):
        assert list(stream_rows(_pieces(data, size))) == rows
    with pytest.raises(DecodeError):
        list(stream_rows(_pieces(data[:len(data) // 2], 1000)))


def _value(rng: random.Random, choices):
    return rng.choice(choices)


def _rows(rng: random.Random, columns, n: int) -> list[list]:
    """Rows drawn from few values (so ties, NULLs and repeated track-ins abound)."""
    pools = {"TRACKINTIMESTAMP": ["2025-01-01 08:00:00", "2025-01-01 09:00:00", None],
             "CONTAINERID": ["C1", "C2", "C3", None], "EQUIPMENTID": ["E1", "E2"], "EQUIPMENTNAME": ["EQ-A", "EQ-B", None],
             "SPECNAME": ["S1", "S2"], "TRACKINQTY": [10, 20, None], "TRACKOUTQTY": [1, 2, None],
             "TRACKOUTTIMESTAMP": ["2025-01-01 10:00:00", "2025-01-01 11:00:00", None]}
    out = []
    for i in range(n):
        out.append([_value(rng, pools[c]) if c in pools else "w" if rng.random() < 0.97 else f"u{i}"
                    for c in columns])
    return out


def _answers(query_type: str, seed: int) -> tuple[dict, bytes]:
    """(the answer built whole, the streamed one) of random units of ``query_type``."""
    rng = random.Random(seed)
    params = {"start_date": "2025-01-01", "end_date": "2025-03-01", "query_type": query_type,
              "equipment_ids": ["E1"], "equipment_names": ["EQ-A"], "container_names": [], "workcenter_groups": [],
              "page": rng.choice([1, 2, 3, 50]), "per_page": rng.choice([1, 3, 10, 500])}
    _, st = EQUIPMENT_PERIOD.statement(params)
    if query_type == "status_hours":
        units = [[[f"R{n}", f"name-{rng.randint(0, 5)}", *[rng.choice([None, 1.5, 2, 0.25]) for _ in range(8)]]
                  for n in range(rng.randint(0, 30))]]
    else:
        units = [_rows(rng, st.names, rng.randint(0, 40)) for _ in range(rng.randint(1, 5))]
    whole = answers.answer(EQUIPMENT_PERIOD, params, [(st.names, rows) for rows in units])
    stored = [answers.sort_unit(st, [list(r) for r in rows]) for rows in units if rows]
    return whole, b"".join(answers.answer_stream(EQUIPMENT_PERIOD, params, [iter(rows) for rows in stored]))


@pytest.mark.parametrize("query_type", ["lots", "jobs", "rejects", "materials", "status_hours"])
@pytest.mark.parametrize("seed", range(12))
def test_the_streamed_answer_is_the_answer_built_whole(query_type, seed):
    whole, streamed = _answers(query_type, seed)
    assert orjson.loads(streamed) == orjson.loads(orjson.dumps(whole))
    assert list(orjson.loads(streamed)) == list(whole)  # the same fields, in the same order


def test_the_random_lots_collapse_partial_trackouts_and_page_past_the_end():
    docs = [_answers("lots", seed)[0] for seed in range(12)]
    assert sum(r["partial_count"] > 1 for a in docs for r in a["data"]) >= 2
    assert any(a["pagination"]["page"] == a["pagination"]["total_pages"] > 1 for a in docs)
