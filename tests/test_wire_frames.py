"""The binary wire format on its own: frame headers of every bin size, and a reader that
splits a body however it is cut into blocks."""

from __future__ import annotations

import msgpack
import pytest

from tracebus.jobs import wire
from tracebus.jobs.chunkcodec import encode_chunk


@pytest.mark.parametrize("size", [0, 1, 255, 256, 65535, 65536, 300_000])
def test_a_chunk_head_and_its_payload_are_one_msgpack_map(size):
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)

    body = wire.chunk_head("records", size, domain="history", batch=3, count=7) + payload

    assert msgpack.unpackb(body, raw=False) == {"type": "records", "domain": "history", "batch": 3, "count": 7,
                                                "chunk": payload}


def test_the_reader_splits_a_body_cut_anywhere_and_expands_chunks_to_rows():
    compressed = encode_chunk(["A", "B"], [[i, "x" * 20] for i in range(2000)])  # zlib'd
    plain = encode_chunk(["A"], [[None]], compress=False)
    body = (wire.frame("meta", job_id="j") + wire.chunk_head("records", len(compressed), count=2000)
            + compressed + wire.chunk_head("records", len(plain), count=1) + plain + wire.frame("complete"))
    assert compressed[0] == 1 and plain[0] == 0

    for step in (1, 7, 4096, len(body)):
        messages = list(wire.read(body[i:i + step] for i in range(0, len(body), step)))
        assert [m["type"] for m in messages] == ["meta", "records", "records", "complete"]
        expanded = wire.expand(messages[1])
        assert list(expanded) == ["type", "count", "data"] and expanded["data"][1999] == {"A": 1999, "B": "x" * 20}
        assert wire.rows_of(messages[2]) == (["A"], [[None]])


def test_a_body_cut_inside_a_map_is_an_error():
    body = wire.frame("meta", job_id="j") + wire.frame("complete", total_records=1)

    with pytest.raises(ValueError, match="inside a message"):
        list(wire.read([body[:-2]]))
