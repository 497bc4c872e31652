"""``tracebus fetch``: the binary format on the wire, NDJSON (or msgpack) in the file, progress on
stderr, and ``--follow`` from right after the submit; over a real gunicorn and real workers, started
once for the module (the fixtures of tests/test_cli_submit.py) and shared by its tests."""

from __future__ import annotations

import json
import urllib.request

from tests.clitools import run_cli
from tests.test_cli_submit import DOMAINS, api, service_for, supervisors, trace  # noqa: F401  (fixtures)
from tracebus.commands.submit import read_cids
from tracebus.jobs import wire


def _get(url: str, path: str, **headers) -> bytes:
    request = urllib.request.Request(url + path, headers={"X-User-Id": "apiuser", **headers})
    with urllib.request.urlopen(request, timeout=60) as resp:
        return resp.read()


def _submit(url: str, cid_file) -> str:
    body = json.dumps({"profile": "query_tool", "container_ids": read_cids(str(cid_file)), "domains": DOMAINS})
    request = urllib.request.Request(url + "/api/trace/events", data=body.encode(), method="POST",
                                     headers={"X-User-Id": "apiuser", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as resp:
        assert resp.status == 202
        return json.loads(resp.read())["data"]["job_id"]  # the dashboard's route: enveloped


def _fetch_following_from_the_start(forked_cli, sup, env, url, cid_file, *argv: str):
    """Submit a job and start ``tracebus fetch JOB --follow ARGV`` while the workers are stopped
    (SIGSTOP: else a small job may be over before the fetch starts, or before a pause reaches
    them), until the follower waits on the job's progress stream: it follows from 0 units done.
    Returns (job id, the fetch process: a real one, forked from the ``forked_cli`` server)."""
    import os
    import signal

    from tests.helpers import wait_for

    workers = sup.workers()
    for pid in workers:
        os.kill(pid, signal.SIGSTOP)
    try:
        job_id = _submit(url, cid_file)
        fetch = forked_cli.start("fetch", job_id, "--follow", *argv, env=env)
        wait_for(lambda: fetch.poll() is not None or any(c.get("cmd") == "xread"
                                                          for c in sup.broker.client.client_list()),
                 60, message="the follower waiting on the job's progress stream")
        assert service_for(env).status(job_id)["progress"]["units_done"] == 0
    finally:
        for pid in workers:
            os.kill(pid, signal.SIGCONT)
    return job_id, fetch


def test_fetch_follows_a_running_job_and_writes_the_bytes_of_the_ndjson_stream(api, tmp_path, forked_cli):
    sup, env, cid_file, url = api
    out = tmp_path / "followed.ndjson"
    job_id, fetch = _fetch_following_from_the_start(forked_cli, sup, env, url, cid_file, "--api", url,
                                                    "--user", "apiuser", "--out", str(out))
    _, err = fetch.communicate(timeout=60)

    assert fetch.returncode == 0, err
    assert service_for(env).status(job_id)["state"] == "completed"
    plain = _get(url, f"/api/trace/job/{job_id}/stream")
    assert out.read_bytes() == plain  # the totals the follower did not know yet filled in
    total = json.loads(plain.splitlines()[-1])["total_records"]
    progress = [line for line in err.splitlines() if line.startswith(f"{job_id}: ")]
    assert progress and progress[-1].startswith(f"{job_id}: {total:,}/{total:,} rows (100%)"), err
    assert f"wrote {total:,} records" in err


def test_fetch_as_msgpack_saves_the_binary_stream_through_the_api_or_the_library(api, tmp_path):
    sup, env, cid_file, url = api
    job_id = _submit(url, cid_file)
    sup.wait(lambda: service_for(env).status(job_id)["state"] == "completed", timeout_s=30, message="the job")
    via_api, via_library = tmp_path / "api.msgpack", tmp_path / "lib.msgpack"

    assert run_cli("fetch", job_id, "--api", url, "--user", "apiuser", "--format", "msgpack", "--quiet",
                   "--out", str(via_api), env=env).code == 0
    library = run_cli("fetch", job_id, "--format", "msgpack", "--out", str(via_library), env=env)

    assert library.code == 0 and via_api.read_bytes() == via_library.read_bytes()
    lines = b"".join(json.dumps(wire.expand(m), ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
                     for m in wire.read([via_api.read_bytes()]))
    assert lines == _get(url, f"/api/trace/job/{job_id}/stream")


def test_fetch_as_parquet_saves_one_typed_domain_through_the_api_or_the_library(api, sample_db, tmp_path):
    import duckdb

    from tests.test_cli_submit import expected_rows

    sup, env, cid_file, url = api
    job_id = _submit(url, cid_file)
    sup.wait(lambda: service_for(env).status(job_id)["state"] == "completed", timeout_s=30, message="the job")
    via_api, via_library = tmp_path / "api.parquet", tmp_path / "lib.parquet"

    fetched = run_cli("fetch", job_id, "--api", url, "--user", "apiuser", "--format", "parquet", "--domain",
                      "history", "--out", str(via_api), env=env)
    library = run_cli("fetch", job_id, "--format", "parquet", "--domain", "history", "--out", str(via_library),
                      env=env)

    assert fetched.code == 0 and "wrote parquet of history" in fetched.err, fetched
    assert " rows" not in fetched.err and " rows" not in library.err  # bytes only: not "0 rows" (issue 36)
    assert library.code == 0 and via_api.read_bytes() == via_library.read_bytes()
    db = duckdb.connect()
    assert db.execute("SELECT count(*) FROM read_parquet(?)", [str(via_api)]).fetchone()[0] == \
        expected_rows(sample_db, cid_file)["history"]
    assert dict(db.execute("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(?))",
                           [str(via_api)]).fetchall())["TRACKOUTTIMESTAMP"] == "TIMESTAMP"
    # Several domains and no --domain, or --follow: one line, exit 2, no file.
    for extra in ((), ("--domain", "history", "--follow")):
        bad = run_cli("fetch", job_id, "--format", "arrow", *extra, "--out", str(tmp_path / "x.arrows"), env=env)
        assert bad.code == 2 and len(bad.err.strip().splitlines()) == 1, bad
        assert not (tmp_path / "x.arrows").exists()
        if not extra:
            assert "--domain is required: the job has 3 (" in bad.err, bad


def test_fetch_follow_of_a_job_not_yet_run_shows_the_final_total_never_a_stale_one(api, tmp_path, forked_cli):
    import re

    sup, env, cid_file, url = api
    out = tmp_path / "followed.ndjson"
    job_id, fetch = _fetch_following_from_the_start(forked_cli, sup, env, url, cid_file,
                                                    "--out", str(out))  # 0 rows at first
    _, err = fetch.communicate(timeout=60)

    assert fetch.returncode == 0, err
    total = json.loads(out.read_bytes().splitlines()[-1])["total_records"]
    assert total > 0
    shown = [tuple(int(n.replace(",", "")) for n in m.groups())
             for m in re.finditer(r"^\S+: ([\d,]+)/([\d,]+) rows", err, re.M)]
    assert shown and shown[-1] == (total, total), err  # the total is the job's, known at the end
    assert all(rows <= of for rows, of in shown), err
