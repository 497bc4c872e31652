"""Under pytest-xdist (``./dev test``), the slowest test files are handed out first.

``--dist loadfile --no-loadscope-reorder`` gives each worker whole files in collection order
(without that flag xdist reorders the files by their number of tests), so a long file that
comes last in the alphabet (test_trace_*, test_up) would start when the others are nearly
done and stretch the run. Moving the longest files to the front lets the short ones fill in
around them. The list is from measured file spans; a file missing from it
only runs later, in its usual order. Within a file the order is unchanged.
"""

from __future__ import annotations

import os

#: Test files, longest first: each file's span (first test's start to last test's end) in a
#: whole-suite run (``./dev test``, 6 workers), measured at commit 5ece247 (the PostgreSQL control
#: files placed by their single-process time: 30 s and 20 s); files under 4 s follow in their usual order.
LONGEST_FIRST = (
    "test_api_stream_memory.py", "test_supervisor.py", "test_hosts.py", "test_trace_jobs.py", "test_trace_chaos.py",
    "test_up.py", "test_up_postgres.py", "test_monitor_browser.py", "test_api_schemathesis.py", "test_failover.py",
    "test_synth.py", "test_frozen_redis.py", "test_sentinel_follow.py", "test_cli_queues.py",
    "test_api_trace.py", "test_postgres_control.py", "test_postgres_faults.py", "test_trace_lifecycle.py",
    "test_api_monitor.py", "test_e2e_contracts.py",
    "test_reliability_restart.py", "test_api_slow_clients.py", "test_cli_submit.py",
    "test_cluster.py", "test_api_stage_jobs.py", "test_outage.py", "test_api_wire.py",
    "test_api_soak.py", "test_api_msd_stages.py", "test_reliability_submit.py",
    "test_api_openapi_findings.py", "test_reliability_oom.py", "test_supervisor_limits.py",
    "test_lineage_ascending.py", "test_deploy.py", "test_msd_job.py", "test_wire_http.py",
    "test_cli_env.py", "test_api_v1.py", "test_api_jobs.py", "test_readme.py",
    "test_api_path_ids.py", "test_api_openapi.py", "test_api_hardening.py", "test_api_streams.py",
    "test_query_jobs.py", "test_postgres_sample.py", "test_source_contract.py", "test_scheduler.py", "test_msd_job_chunking.py", "test_api_service.py",
    "test_e2e_http.py", "test_cli_send_message.py", "test_lineage_trees.py",
    "test_export_columnar.py", "test_jobs_domain_scan.py", "test_cluster_http.py",
    "test_msd_e2e_http.py", "test_cli_status.py", "test_deploy_nginx.py", "test_cli_fetch.py",
)
_RANK = {name: rank for rank, name in enumerate(LONGEST_FIRST)}


def pytest_collection_modifyitems(session, config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    items.sort(key=lambda item: _RANK.get(item.path.name, len(_RANK)))  # stable: in-file order kept
