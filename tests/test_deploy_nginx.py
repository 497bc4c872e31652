"""deploy/nginx/tracebus.conf run for real: nginx (TLS, a self-signed certificate) in front of
gunicorn serving the API, with trace workers behind it. The request-size limit, the identity
headers it overwrites, the /metrics allow-list and an event stream are checked through it.

Then deploy/nginx/dashboard/ as deploy/README.md ("Behind the dashboard") installs it: included
in the dashboard's server, in front of ``tracebus up`` and a stand-in for the dashboard's app:
the query-tool page's lineage (its own composables), the MSD page's calls and the
equipment-period page work through it against a default ``up``; the dashboard keeps the paths
tracebus does not serve; the session's user and the proxy's token reach a token-mode ``up``.
Skipped where nginx is not installed (.ci/run installs it)."""

from __future__ import annotations

import contextlib
import datetime
import http.cookies
import http.server
import json
import os
import re
import shutil
import signal
import sqlite3
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.test_dashboard_envelope import (  # noqa: F401  (default_up: a fixture)
    composables_missing, default_up, draw, write_dashboard_src)
from tests.test_lineage_trees import SEEDS, Db, expected_forward
from tests.test_up import ready_up
from tests.test_cli_submit import api, service_for, supervisors, trace  # noqa: F401  (fixtures: workers + gunicorn)
from tracebus.commands.submit import read_cids
from tracebus.redis_proc import free_port

CONF = Path(__file__).resolve().parent.parent / "deploy" / "nginx" / "tracebus.conf"

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None or shutil.which("openssl") is None,
                                reason="nginx or openssl is not installed")


@pytest.fixture
def nginx(api, tmp_path):
    sup, env, cid_file, api_url = api
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=tracebus.example", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    http_port, https_port = free_port(), free_port()
    site = CONF.read_text()
    site = re.sub(r"\n\s*listen \[::\]:\d+[^;]*;", "", site)  # the test host may have no IPv6
    site = (site.replace("listen 80;", f"listen 127.0.0.1:{http_port};")
            .replace("listen 443 ssl http2;", f"listen 127.0.0.1:{https_port} ssl http2;")
            .replace("server 127.0.0.1:8000;", f"server {api_url.removeprefix('http://')};")
            .replace("/etc/ssl/tracebus/fullchain.pem", str(cert))
            .replace("/etc/ssl/tracebus/privkey.pem", str(key)))
    (tmp_path / "tracebus.conf").write_text(site)
    base = f"https://127.0.0.1:{https_port}"
    tls = ssl.create_default_context(cafile=str(cert))
    tls.check_hostname = False
    with running_nginx(tmp_path, "tracebus.conf", base, tls):
        yield sup, env, cid_file, base, tls, http_port


@contextlib.contextmanager
def running_nginx(tmp_path: Path, site: str, base: str, tls=None):
    """nginx (as the test's user, files in ``tmp_path``) serving ``tmp_path/site``, until
    ``base``/healthz answers; stopped with SIGQUIT at the end."""
    temp = tmp_path / "nginx-temp"
    temp.mkdir()
    paths = " ".join(f"{kind}_temp_path {temp}/{kind};" for kind in ("client_body", "proxy", "fastcgi",
                                                                     "uwsgi", "scgi"))
    # as root, nginx's workers would be nobody, who cannot enter pytest's private tmp folders
    user = "user root;\n" if os.geteuid() == 0 else ""
    (tmp_path / "nginx.conf").write_text(
        f"{user}pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{ access_log off; {paths} include {tmp_path}/{site}; }}\n")
    log = tmp_path / "nginx.out"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["nginx", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"),
                                 "-e", str(tmp_path / "error.log"), "-g", "daemon off;"],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)

    def up():
        assert proc.poll() is None, log.read_text() + (tmp_path / "error.log").read_text()
        try:
            with urllib.request.urlopen(base + "/healthz", context=tls, timeout=2) as resp:
                return resp.status == 200
        except urllib.error.HTTPError as e:
            return e.code < 500  # the dashboard's server has no /healthz of tracebus: it answers
        except OSError:
            return False

    try:
        wait_for(up, 20, message="nginx answering")
        yield proc
    finally:
        proc.send_signal(signal.SIGQUIT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def call(base, tls, method, path, body: bytes | None = None, headers=None):
    request = urllib.request.Request(base + path, data=body, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, context=tls, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_nginx_fronts_the_api_as_deploy_readme_says(nginx):
    sup, env, cid_file, base, tls, http_port = nginx
    cids = read_cids(str(cid_file))

    # port 80 sends everyone to TLS
    plain = urllib.request.Request(f"http://127.0.0.1:{http_port}/healthz")
    opener = urllib.request.build_opener(type("NoRedirect", (urllib.request.HTTPRedirectHandler,),
                                              {"redirect_request": lambda *a, **k: None}))
    with pytest.raises(urllib.error.HTTPError) as moved:
        opener.open(plain, timeout=10)
    assert moved.value.code == 301 and moved.value.headers["Location"].startswith("https://")

    # a client's own X-User-Id and X-Forwarded-For are overwritten: the job belongs to the
    # anonymous caller at the address nginx saw
    body = {"profile": "query_tool", "domains": ["history"], "container_ids": cids}
    status, answer = call(base, tls, "POST", "/api/trace/events", json.dumps(body).encode(),
                          {"X-User-Id": "mallory", "X-Forwarded-For": "203.0.113.9"})
    assert status == 202, answer
    job = json.loads(answer)["data"]  # the dashboard's route: in its envelope
    assert service_for(env).status(job["job_id"])["user"] == "anon:127.0.0.1"

    # the event stream comes through to its end event
    request = urllib.request.Request(base + job["events_url"])
    with urllib.request.urlopen(request, context=tls, timeout=60) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        text = resp.read().decode()
    assert "event: progress" in text and "event: end" in text

    # 2 MB of CIDs pass nginx (its default limit is 1 MB): the API reads them and answers
    # (400: the profile is made up, so no job runs); 9 MB are refused by nginx itself
    big = json.dumps({**body, "profile": "made-up", "container_ids": [f"C{i:015d}" for i in range(110_000)]})
    assert 2 << 20 < len(big) < 8 << 20
    status, answer = call(base, tls, "POST", "/api/trace/events", big.encode())
    assert status == 400 and json.loads(answer)["error"]["code"] == "INVALID_PROFILE", answer[:300]
    huge = b'{"pad": "' + b"x" * (9 << 20) + b'"}'
    status, answer = call(base, tls, "POST", "/api/trace/events", huge)
    assert status == 413 and b"nginx" in answer  # nginx's own page: the API never saw it

    # /metrics is open to the monitoring network (here: loopback)
    status, answer = call(base, tls, "GET", "/metrics")
    assert status == 200 and b"tracebus_queue_depth" in answer


# -- behind the dashboard: deploy/nginx/dashboard/ in the dashboard's server ---------------------
DROP_IN = CONF.parent / "dashboard"
PROXY_TOKEN = "proof-" + "ab" * 16


class StandIn(http.server.BaseHTTPRequestHandler):
    """The dashboard's app: its session is a cookie ``session=<user>``; it answers nginx's
    /internal/tracebus-user with the route deploy/README.md gives, and every other path itself."""

    def do_GET(self):  # noqa: N802 (http.server's names)
        if self.path == "/internal/tracebus-user":
            cookie = http.cookies.SimpleCookie(self.headers.get("Cookie", ""))
            self.send_response(204)
            self.send_header("X-User-Id", cookie["session"].value if "session" in cookie else "")
            self.end_headers()
            return
        body = f"dashboard: {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def behind_the_dashboard(tmp_path: Path, api_url: str, token: str = "CHANGE-ME-TRACEBUS_PROXY_TOKEN"):
    """The dashboard's nginx server (plain HTTP here) with the drop-in included as deploy/README.md
    says, in front of ``api_url`` and a stand-in for the dashboard's app; yields its base URL."""
    app = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    threading.Thread(target=app.serve_forever, daemon=True).start()
    snippets = tmp_path / "snippets"
    snippets.mkdir()
    for name in ("tracebus-locations.conf", "tracebus-proxy.conf"):
        text = (DROP_IN / name).read_text()
        (snippets / name).write_text(text.replace("127.0.0.1:8000", api_url.removeprefix("http://"))
                                     .replace("127.0.0.1:8080", f"127.0.0.1:{app.server_port}")
                                     .replace("CHANGE-ME-TRACEBUS_PROXY_TOKEN", token))
    port = free_port()
    (tmp_path / "dashboard.conf").write_text(
        f"server {{\n    listen 127.0.0.1:{port};\n    server_name dashboard.example;\n"
        f"    location / {{ proxy_pass http://127.0.0.1:{app.server_port}; }}\n"
        f"    include snippets/tracebus-locations.conf;\n}}\n")
    base = f"http://127.0.0.1:{port}"
    try:
        with running_nginx(tmp_path, "dashboard.conf", base):
            yield base
    finally:
        app.shutdown()
        app.server_close()


def page_call(base: str, method: str, path: str, body: dict | None = None, user: str | None = None):
    """(status, headers, body) of a page's request through the dashboard's origin."""
    headers = {"Content-Type": "application/json", **({"Cookie": f"session={user}"} if user else {})}
    request = urllib.request.Request(base + path, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def data(answer: tuple) -> dict:
    """The ``data`` of an enveloped 200/202 answer."""
    status, _, raw = answer
    doc = json.loads(raw)
    assert status in (200, 202) and doc["success"] is True, (status, raw[:500])
    return doc["data"]


def equipment_window(db: Path, days: int) -> dict:
    with sqlite3.connect(db) as conn:
        resource, first = conn.execute("SELECT RESOURCEID, MIN(CREATEDATE) FROM DW_MES_JOB GROUP BY RESOURCEID "
                                       "ORDER BY COUNT(*) DESC LIMIT 1").fetchone()
    start = datetime.date.fromisoformat(first[:10])
    return {"equipment_ids": [resource], "equipment_names": [], "start_date": start.isoformat(),
            "end_date": (start + datetime.timedelta(days=days)).isoformat(), "query_type": "jobs"}


def test_the_dashboards_pages_work_through_the_drop_in_against_a_default_up(default_up, tmp_path):
    db = default_up.home / "var" / "sample.db"
    with behind_the_dashboard(tmp_path, default_up.base_url) as base:
        # the query-tool page's lineage trees, drawn by its own composables
        if composables_missing() is None:
            with sqlite3.connect(db) as conn:
                seeds = [r[0] for r in conn.execute(SEEDS)]
            want = expected_forward(Db(db), seeds)
            drawn = draw(write_dashboard_src(tmp_path / "dashboard-src"), base, "forward", seeds)
            assert sorted(drawn["roots"]) == want["roots"] and drawn["roots"]
            assert {c: sorted(e["children"]) for c, e in drawn["entries"].items() if c in want["children_map"]} \
                == want["children_map"]

        # the MSD page: lookups, seeds, the analysis job and its events, status, detail, export
        assert data(page_call(base, "GET", "/api/mid-section-defect/station-options"))
        seeded = data(page_call(base, "POST", "/api/trace/seed-resolve", {"profile": "mid_section_defect", "params": {
            "mode": "date_range", "station": "測試", "start_date": "2025-01-01", "end_date": "2025-01-10"}}))
        seeds = seeded["seed_container_ids"]
        assert seeded["stage"] == "seed-resolve" and seeds
        accepted = data(page_call(base, "POST", "/api/trace/events", {
            "profile": "mid_section_defect", "container_ids": seeds, "seed_container_ids": seeds,
            "domains": ["upstream_history", "materials"], "cache_key": seeded["cache_key"],
            "params": {"station": "測試", "direction": "backward", "start_date": "2025-01-01",
                       "end_date": "2025-01-10"}}))
        with urllib.request.urlopen(base + accepted["events_url"], timeout=60) as resp:
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            assert "event: end" in resp.read().decode()
        status = data(page_call(base, "GET", f"/api/job/{accepted['job_id']}"))
        assert status["status"] == "completed", status
        traced = data(page_call(base, "GET", accepted["status_url"]))
        detail = data(page_call(base, "GET", "/api/mid-section-defect/analysis/detail?trace_query_id="
                                f"{traced['trace_query_id']}&page=1&page_size=5"))
        assert detail["trace_query_id"] == traced["trace_query_id"] and "pagination" in detail
        code, headers, raw = page_call(base, "GET", "/api/mid-section-defect/export?trace_query_id="
                                       + detail["trace_query_id"])
        assert code == 200 and headers["Content-Type"].startswith("text/csv") and raw.startswith("\ufeff".encode())

        # the equipment-period page
        answer = data(page_call(base, "POST", "/api/query-tool/equipment-period", equipment_window(db, 7)))
        assert answer["total"] > 0 and answer["data"]

        # the web monitor on the dashboard's origin
        code, headers, raw = page_call(base, "GET", "/ui/")
        assert code == 200 and b"/ui/monitor.js" in raw
        assert page_call(base, "GET", "/ui/monitor.js")[0] == 200
        assert json.loads(page_call(base, "GET", "/api/v1/me")[2])["user"] == "anon:127.0.0.1"  # default up

        # the dashboard keeps every path tracebus does not serve, its own job ids included
        for method, path in (("POST", "/api/query-tool/resolve"), ("GET", "/api/mid-section-defect/analysis"),
                             ("GET", "/api/job/reject-1234?prefix=reject"), ("GET", "/query-tool")):
            code, _, raw = page_call(base, method, path)
            assert (code, raw) == (200, f"dashboard: {path}".encode())


@pytest.fixture(scope="module")
def token_up(tmp_path_factory):
    """``tracebus up`` behind the dashboard as deploy/README.md sets it: nginx trusted, its
    proof required, bearer tokens configured (token mode)."""
    with ready_up(tmp_path_factory.mktemp("up"), "--scale", "0.01", TRACEBUS_TRUSTED_PROXIES="127.0.0.1",
                  TRACEBUS_PROXY_TOKEN=PROXY_TOKEN, TRACEBUS_API_TOKENS="tok-robot-0123456789:robot") as run:
        yield run


def test_the_drop_in_names_the_dashboards_user_with_the_proxy_token(token_up, tmp_path):
    db = token_up.home / "var" / "sample.db"
    (tmp_path / "right").mkdir()
    with behind_the_dashboard(tmp_path / "right", token_up.base_url, token=PROXY_TOKEN) as base:
        accepted = data(page_call(base, "POST", "/api/query-tool/equipment-period", equipment_window(db, 40),
                                  user="alice"))
        assert accepted["async"] is True
        assert json.loads(page_call(base, "GET", "/api/v1/me", user="alice")[2])["user"] == "alice"
        mine = page_call(base, "GET", f"/api/job/{accepted['job_id']}?prefix=query-tool", user="alice")
        theirs = page_call(base, "GET", f"/api/job/{accepted['job_id']}?prefix=query-tool", user="bob")
        assert data(mine)["job_id"] == accepted["job_id"] and theirs[0] == 404
        # nobody logged in: no user; a client's own X-User-Id never gets through
        code, _, raw = page_call(base, "GET", f"/api/job/{accepted['job_id']}?prefix=query-tool")
        assert code == 401, raw
    (tmp_path / "wrong").mkdir()
    with behind_the_dashboard(tmp_path / "wrong", token_up.base_url) as base:  # X-Proxy-Token left as shipped
        code, _, raw = page_call(base, "GET", "/api/mid-section-defect/station-options", user="alice")
        assert code == 401 and b"X-Proxy-Token" in raw
