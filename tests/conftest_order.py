"""Under pytest-xdist (``./dev test``), the slowest test files are handed out first.

``--dist loadfile`` gives each worker whole files in collection order, so a long file that
comes last in the alphabet (test_trace_*, test_up) would start when the others are nearly
done and stretch the run. Moving the longest files to the front lets the short ones fill in
around them. The list is from measured durations (``--durations``); a file missing from it
only runs later, in its usual order. Within a file the order is unchanged.
"""

from __future__ import annotations

import os

#: Test files, longest first (measured with ``--junitxml``: each test's time, summed per file).
LONGEST_FIRST = (
    # the first ten re-measured alone (-n 0) after test_e2e_http's job went to 2,500 CIDs and
    # test_trace_jobs' to 8,000 (its 200 units kept)
    "test_up.py", "test_api_schemathesis.py", "test_trace_jobs.py", "test_cli_submit.py", "test_trace_chaos.py",
    "test_cli_fetch.py", "test_e2e_contracts.py", "test_cli_env.py", "test_supervisor.py",
    "test_e2e_http.py", "test_monitor_browser.py", "test_api_soak.py", "test_api_monitor.py",
    "test_hosts.py", "test_reliability_restart.py", "test_api_wire.py", "test_frozen_redis.py",
    "test_msd_job_chunking.py", "test_api_slow_clients.py", "test_api_jobs.py", "test_readme.py",
    "test_failover.py", "test_supervisor_limits.py", "test_api_trace.py", "test_api_service.py",
    "test_trace_lifecycle.py", "test_query_jobs.py", "test_broker_connections.py", "test_synth.py",
    "test_cluster_http.py", "test_cli_queues.py", "test_scheduler.py", "test_outage.py",
    "test_reliability_oom.py", "test_wire_http.py",
)
_RANK = {name: rank for rank, name in enumerate(LONGEST_FIRST)}


def pytest_collection_modifyitems(session, config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    items.sort(key=lambda item: _RANK.get(item.path.name, len(_RANK)))  # stable: in-file order kept
