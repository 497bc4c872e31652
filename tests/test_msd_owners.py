"""An MSD job's detail rows and CSV export are its owner's (issue 24, finding 3).

The ``trace_query_id`` is a hash of the request, so anyone can compute another's: the
index from it to the job is kept per owner (:func:`tracebus.trace.owners.scope`), and
another user's id answers as an unknown one (410 CACHE_EXPIRED), never with their rows.
"""

from __future__ import annotations

import pytest

from tests.conftest_trace import wait_final
from tests.msdjob_support import build_example_db, example_body, run_job
from tracebus.trace.errors import CacheExpired
from tracebus.trace.msd.job.detailstore import DetailStore


def test_only_the_owner_reads_the_detail_and_export_and_a_second_owner_gets_a_job_of_its_own(supervisor, tmp_path):
    # Given alice's completed MSD job
    svc, sup, alice_job, status = run_job(supervisor, build_example_db(tmp_path / "ex.db"), example_body(), 2)
    assert status["state"] == "completed", status
    tqid, details = status["trace_query_id"], DetailStore(svc.store)
    assert details.page(tqid, user="alice")["pagination"]["total_count"] == 4

    # Then bob and an anonymous caller holding her trace_query_id read nothing of it
    for other in ("bob", "anon:203.0.113.9"):
        with pytest.raises(CacheExpired):
            details.page(tqid, user=other)
        with pytest.raises(CacheExpired):
            details.export_csv(tqid, user=other)

    # When bob sends the very same request, it becomes his own job (not a spool hit of hers)
    bob_job = svc.submit(svc.parse(example_body(), "bob"))
    assert bob_job != alice_job
    assert wait_final(sup, svc, bob_job, 60)["trace_query_id"] == tqid

    # Then each reads their own job under the same id
    assert details.job_of(tqid, "alice")[0] == alice_job
    assert details.job_of(tqid, "bob")[0] == bob_job
    assert "".join(details.export_csv(tqid, user="bob")).count("\r\n") == 5
