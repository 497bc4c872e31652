"""The API does what its OpenAPI document says, checked by schemathesis (issue 12, item 6).

A real system: the session's redis-server, a worker supervisor reading the trace queue and
gunicorn serving the app (:mod:`tests.api_process`). schemathesis (its CLI, in a subprocess)
reads ``/openapi.json`` and sends generated requests, valid and invalid, to every operation
with every check it has on (its default): no 5xx, every status, content type, header and body as documented,
invalid data refused and valid data accepted. The budget is bounded (a few examples per
operation and phase, a fixed seed, a time limit), so the run takes about a minute.

``job_id`` is a completed job of the caller (so the result, stream and events operations
answer 200 and their bodies are checked) and the user header is fixed to its owner; both are
fuzzed elsewhere (tests/test_api_path_ids.py, tests/test_api_contracts.py), so the coverage
phase's variations of those two, which the fixed values would turn back into repeats of the
unvaried request, are not sent (tests/schemathesis_hooks.py). The stage
requests and the trace request have rules across fields that a schema cannot state (a date
range of at most 730 days, domains allowed by the profile, the MSD params), so schemathesis
does not require every schema-valid body of those three to be accepted, nor every ``domain``
of the export (it must be one of the job's), nor every query-kind request (dates in order,
ported query types, a kind's own params); everything else is checked there too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from tests.api_process import running_api
from tests.api_support import api_broker, api_settings, body, trace_cids, trace_workers  # noqa: F401
from tests.helpers import wait_for

#: schemathesis's CLI, run by this interpreter (its package has no __main__).
SCHEMATHESIS = [sys.executable, "-c", "import sys; from schemathesis.cli import schemathesis; sys.exit(schemathesis())"]
USER = "schemathesis"
#: hypothesis's storage directory, kept for every run on this machine. With the generation
#: database off it holds only hypothesis's Unicode tables (its character map and the codec
#: intervals, computed from all 1.1M code points when missing: about 2 s of CPU per run, which
#: a fresh directory under the test's cwd paid every time); they depend on nothing but the
#: Python's Unicode version, which is in their path.
HYPOTHESIS_HOME = Path(tempfile.gettempdir()) / "tracebus-hypothesis"
#: Drops the coverage phase's variations of the two parameters the config fixes, which the fix
#: turns back into repeats of the operation's unvaried request (same request, same checks).
HOOKS = Path(__file__).resolve().parent / "schemathesis_hooks.py"
#: Operations whose bodies have rules across fields (see the module docstring).
CROSS_FIELD = (r"^(/api/trace/(events|seed-resolve|lineage)|/api/v1/jobs/\{job_id\}/export|/api/v1/jobs"
               r"|/api/query-tool/equipment-period)$")
#: schemathesis.toml. A valid request may also be answered 404 (a job id of the right shape that
#: is not ours), 409 (a job not in the state the action needs), 410 (a trace_query_id whose
#: result expired) or 414 (all parameters at their longest, URL-encoded, past gunicorn's limit).
CONFIG = """\
[parameters]
job_id = "{job_id}"
"{user_header}" = "{user}"

[checks]
positive_data_acceptance.expected-statuses = [200, 202, 404, 409, 410, 414]

[[operations]]
include-path-regex = '{cross_field}'
checks.positive_data_acceptance.enabled = false
"""


def _call(url: str, method: str = "GET", payload=None) -> dict:
    data = json.dumps(payload).encode() if payload is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", "X-User-Id": USER})
    with urllib.request.urlopen(req, timeout=30) as resp:
        doc = json.loads(resp.read())
    return doc["data"] if isinstance(doc, dict) and doc.get("success") is True else doc  # a dashboard route's


def test_the_api_matches_its_openapi_document(api_settings, trace_workers, trace_cids, tmp_path):
    # The caller is an operator too, so the monitor's dead-letter operations are exercised.
    # The dashboard's routes as by default (in their envelope), and the document saying so.
    with running_api(api_settings, tmp_path / "gunicorn.log", TRACEBUS_API_WORKERS="2",
                     TRACEBUS_API_ADMINS=USER, TRACEBUS_API_DASHBOARD_ENVELOPE="1") as url:
        # Given a completed job of the user schemathesis calls as
        job_id = _call(f"{url}/api/trace/events", "POST", body(trace_cids[:300], ("history", "holds")))["job_id"]
        wait_for(lambda: _call(f"{url}/api/trace/job/{job_id}")["status"] == "completed", 60,
                 interval_s=0.2, message="the job to complete")
        config = tmp_path / "schemathesis.toml"
        config.write_text(CONFIG.format(job_id=job_id, user_header=api_settings.user_header, user=USER,
                                        cross_field=CROSS_FIELD))

        # When schemathesis runs every check on every operation, bounded
        argv = [*SCHEMATHESIS, "--config-file", str(config), "run", f"{url}/openapi.json",
                "--phases", "examples,coverage,fuzzing", "--max-examples", "10", "--seed", "12",
                "--workers", "1", "--request-timeout", "30", "--generation-database", "none",
                "--no-color", "--suppress-health-check", "all", "--output-truncate", "true"]
        env = {**os.environ, "HYPOTHESIS_STORAGE_DIRECTORY": str(HYPOTHESIS_HOME), "SCHEMATHESIS_HOOKS": str(HOOKS),
               "TRACEBUS_SCHEMATHESIS_FIXED": f"path:job_id,header:{api_settings.user_header}"}
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        (tmp_path / "schemathesis.log").write_text(done.stdout + done.stderr)

    # Then it found nothing: no 5xx, no answer that differs from the document
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-12000:]
    summary = output.split("SUMMARY")[-1]
    selected = re.search(r"Selected: (\d+)/(\d+)", summary)
    assert selected and selected[1] == selected[2] and f"Tested: {selected[1]}" in summary, summary
    assert " passed" in summary and "failure" not in summary, summary
    # (1,548 requests: 1,499 distinct ones, the same as without the hook, which sent 1,817)
    assert int(re.search(r"(\d+) generated", summary)[1]) > 1000, summary
