"""quality_meta (MSD.md §2): domain metas and the query merge, no Redis."""

from __future__ import annotations

from tracebus.trace.msd import quality_meta as qm


def test_a_complete_domain_reports_its_rows():
    assert qm.domain_meta("materials", observed_rows=7) == {
        "status": "complete", "scope": "domain", "reasons": [], "domain": "materials",
        "observed_rows": 7}


def test_failed_chunks_make_a_domain_partial_with_ranges():
    meta = qm.domain_meta("upstream_history", observed_rows=5, failed_chunks=[["C1", "C2", "C3"], ["C9"]])
    assert meta["status"] == "partial" and meta["reasons"] == ["chunk_failure"]
    assert meta["failed_ranges"] == [{"start": "C1", "end": "C3"}, {"start": "C9", "end": "C9"}]
    assert meta["has_partial_failure"] is True and meta["failed_chunk_count"] == 2


def test_an_exception_fails_the_domain():
    meta = qm.domain_meta("materials", error=RuntimeError("ORA-01013"))
    assert (meta["status"], meta["reasons"], meta["failed_domains"]) == (
        "failed", ["domain_fetch_failed"], ["materials"])


def test_no_metas_merge_to_complete():
    assert qm.merge([]) == {"status": "complete", "scope": "query", "reasons": []}


def test_worst_status_wins_and_lists_are_merged():
    merged = qm.merge([qm.domain_meta("a", observed_rows=1),
                       {"status": "truncated", "domain": "b", "reasons": ["max_total_rows_exceeded"]},
                       qm.domain_meta("c", failed_chunks=[["X", "Y"]])])
    assert merged["status"] == "partial"
    assert merged["reasons"] == ["max_total_rows_exceeded", "chunk_failure"]
    assert merged["truncated_domains"] == ["b"]
    assert merged["failed_ranges"] == [{"start": "X", "end": "Y"}]


def test_a_failed_domain_makes_the_query_partial_with_domain_failure():
    merged = qm.merge([qm.domain_meta("a"), qm.domain_meta("b", error="boom")])
    assert merged["status"] == "partial"
    assert merged["reasons"] == ["domain_fetch_failed", "domain_failure"]
    assert merged["failed_domains"] == ["b"]


def test_unknown_status_normalises_to_complete():
    assert qm.normalize({"status": "weird", "extra": 1}) == {
        "status": "complete", "scope": "query", "reasons": [], "extra": 1}
