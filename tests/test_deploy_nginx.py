"""deploy/nginx/tracebus.conf run for real: nginx (TLS, a self-signed certificate) in front of
gunicorn serving the API, with trace workers behind it. The request-size limit, the identity
headers it overwrites, the /metrics allow-list and an event stream are checked through it.
Skipped where nginx is not installed (.ci/run installs it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import wait_for
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
    temp = tmp_path / "nginx-temp"
    temp.mkdir()
    paths = " ".join(f"{kind}_temp_path {temp}/{kind};" for kind in ("client_body", "proxy", "fastcgi",
                                                                     "uwsgi", "scgi"))
    # as root, nginx's workers would be nobody, who cannot enter pytest's private tmp folders
    user = "user root;\n" if os.geteuid() == 0 else ""
    (tmp_path / "nginx.conf").write_text(
        f"{user}pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{ access_log off; {paths} include {tmp_path}/tracebus.conf; }}\n")
    log = tmp_path / "nginx.out"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["nginx", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"),
                                 "-e", str(tmp_path / "error.log"), "-g", "daemon off;"],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    base = f"https://127.0.0.1:{https_port}"
    tls = ssl.create_default_context(cafile=str(cert))
    tls.check_hostname = False

    def up():
        assert proc.poll() is None, log.read_text() + (tmp_path / "error.log").read_text()
        try:
            with urllib.request.urlopen(base + "/healthz", context=tls, timeout=2) as resp:
                return resp.status == 200
        except OSError:
            return False

    try:
        wait_for(up, 20, message="nginx answering /healthz over TLS")
        yield sup, env, cid_file, base, tls, http_port
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
