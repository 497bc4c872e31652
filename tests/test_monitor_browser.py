"""The web monitor in a real headless Chromium, over a real gunicorn and real workers.

The system is a redis-server, a ``tracebus worker`` supervisor whose units each take 0.3 s (:mod:`tests.slow_units`, so a job runs long enough to
watch) and the API under gunicorn, with bearer tokens on: the browser signs in by typing its
token in the page. The enveloped API (``TRACEBUS_API_ENVELOPE=1``) is a second gunicorn over the
same Redis and workers. Chromium is Debian's ``chromium`` driven through ``chromium-driver`` by
selenium; without them the module is skipped and says what to install (``.ci/run`` installs
them).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import NO_REUSE, wait_for
from tests.redis_server import free_port
from api.settings import ApiSettings
from tests.test_e2e_http import System
from tracebus.engine.broker import Broker
from tracebus.engine.message import Message
from tracebus.trace.synth import cids

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="no headless Chromium here: install Debian's chromium and chromium-driver "
           "(apt-get install chromium chromium-driver; .ci/run does)")

TOKENS = {"alice": "tok-alice-0123456789", "ops": "tok-ops-0123456789"}
#: Small units, each made 0.3 s long: a 500-CID history job is 25 units, about 4 s on 2 workers.
ENV = {"TRACE_CHUNK_CIDS": "20", "TRACE_ASYNC_CID_THRESHOLD": "200", "TRACE_JOB_MAX_INFLIGHT_UNITS": "2",
       "TRACEBUS_BLOCK_MS": "100", "TRACEBUS_GRACEFUL_TIMEOUT_SECONDS": "5", "TRACEBUS_LOG_LEVEL": "warning",
       "TRACEBUS_RATE_LIMITS": "off", "TRACEBUS_API_WORKERS": "2", "TRACEBUS_API_THREADS": "8",
       "TRACEBUS_API_TOKENS": ",".join(f"{t}:{u}" for u, t in TOKENS.items()), "TRACEBUS_API_ADMINS": "ops",
       "TRACEBUS_MIDDLEWARE": "tests.slow_units:SlowUnits", "TEST_SLOW_UNIT_SECONDS": "0.3", **NO_REUSE}


class Monitored(System):
    """Redis, the supervisor and gunicorn (:class:`tests.test_e2e_http.System`) set up for the
    monitor, with gunicorn's access log in ``directory``."""

    def __init__(self, directory: Path, db: Path, **extra_env: str):
        self.access_log = directory / "access.log"
        super().__init__(directory, db, **{**ENV, "TRACEBUS_API_ACCESS_LOG": str(self.access_log), **extra_env})

    def call(self, method: str, path: str, user: str = "alice", payload=None) -> dict:
        """The JSON answer of a request as ``user`` (unwrapped when the API envelopes it)."""
        data = json.dumps(payload).encode() if payload is not None else None
        req = urllib.request.Request(self.base_url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {TOKENS[user]}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            doc = json.load(resp)
        return doc["data"] if self.env.get("TRACEBUS_API_ENVELOPE") == "1" else doc


class Enveloping(Monitored):
    """A second gunicorn over ``system``'s Redis, key prefix and workers, with
    ``TRACEBUS_API_ENVELOPE=1`` (its own port and access log in ``directory``)."""

    def __init__(self, system: Monitored, directory: Path):
        self.directory, self.redis = directory, None
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.access_log = directory / "access.log"
        self.env = {**system.env, "TRACEBUS_API_BIND": f"127.0.0.1:{self.port}",
                    "TRACEBUS_API_ACCESS_LOG": str(self.access_log), "TRACEBUS_API_ENVELOPE": "1"}
        self.processes = {"gunicorn": self._start("gunicorn", [sys.executable, "-m", "gunicorn", "-c",
                                                               "api/gunicorn.conf.py"], self.env)}


@pytest.fixture(scope="module")
def system(sample_db, tmp_path_factory):
    running = Monitored(tmp_path_factory.mktemp("monitor"), sample_db)
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    # Chromium's own temporary folders (org.chromium.Chromium.*) go under pytest's, not TMPDIR
    tmp = tmp_path_factory.mktemp("chromium")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.add_argument(f"--user-data-dir={tmp / 'profile'}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER, env={**os.environ, "TMPDIR": str(tmp)}), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def sign_in(browser, system: System, user: str) -> None:
    """Open the page (a new tab's sessionStorage is empty) and type ``user``'s token."""
    browser.get(system.base_url + "/")
    browser.execute_script("sessionStorage.clear()")
    browser.get(system.base_url + "/")
    field = browser.find_element(By.ID, "token")
    field.clear()
    field.send_keys(TOKENS[user])
    browser.find_element(By.ID, "token-save").click()
    WebDriverWait(browser, 10).until(expected_conditions.text_to_be_present_in_element(
        (By.ID, "whoami"), f"signed in as {user}"))


def script_errors(browser) -> list[str]:
    """Errors the page's script raised (the console's SEVERE entries but failed requests, which
    the page reports itself, like the 401 before a token is given)."""
    return [e["message"] for e in browser.get_log("browser")
            if e["level"] == "SEVERE" and "Failed to load resource" not in e["message"]]


def units_shown(browser, job_id: str) -> float:
    """The value of the job's progress bar (units settled), read again on a repaint."""
    for _ in range(5):
        try:
            return float(browser.find_element(By.ID, f"progress-{job_id}").get_property("value"))
        except StaleElementReferenceException:
            continue
    raise AssertionError("the progress bar kept being replaced")


def fresh(read, tries: int = 5):
    """``read()`` again while the page repaints what it found (a stale element), up to ``tries``."""
    for _ in range(tries):
        try:
            return read()
        except StaleElementReferenceException:
            continue
    raise AssertionError("the element kept being replaced")


def test_the_page_shows_the_system_and_asks_for_a_token(system, browser):
    browser.get(system.base_url + "/")
    browser.execute_script("sessionStorage.clear()")
    browser.get(system.base_url + "/")

    WebDriverWait(browser, 10).until(expected_conditions.text_to_be_present_in_element(
        (By.ID, "notice"), "bearer token"))
    browser.find_element(By.ID, "token").send_keys("not-a-token")
    browser.find_element(By.ID, "token-save").click()
    WebDriverWait(browser, 10).until(expected_conditions.text_to_be_present_in_element(
        (By.ID, "notice"), "The API refused this token (unknown bearer token)"))
    sign_in(browser, system, "alice")
    wait = WebDriverWait(browser, 10)
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#queues-body tr[data-queue='trace-events']"))
    wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#workers-body tr[data-consumer]")) == 2)
    wait.until(expected_conditions.text_to_be_present_in_element((By.ID, "redis-body"), "noeviction"))
    wait.until(expected_conditions.text_to_be_present_in_element(
        (By.ID, "source-sessions"), "Source sessions: 0 in use of 8, 0 units waiting"))

    assert browser.execute_script("return sessionStorage.getItem('tracebus.token')") == TOKENS["alice"]
    assert "no maxmemory" in browser.find_element(By.ID, "redis-body").text
    assert browser.find_element(By.ID, "dead").is_displayed() is False  # alice is no operator
    browser.get(system.base_url + "/ui/")  # the page's other address; the token is kept in the tab
    WebDriverWait(browser, 10).until(expected_conditions.text_to_be_present_in_element(
        (By.ID, "whoami"), "signed in as alice"))
    assert script_errors(browser) == []


def test_a_running_jobs_progress_moves_live_and_the_cancel_button_cancels_it(system, browser, sample_db):
    sign_in(browser, system, "alice")
    # Up to 1,500 CIDs (the test sample's 58 units, about 9 s on 2 idle workers): still running when the
    # button is clicked, after the waits below (with 25 units, a loaded run's job ended first and
    # the button was hidden).
    traced = cids(sample_db)[:1500]
    units = -(-len(traced) // int(ENV["TRACE_CHUNK_CIDS"]))
    accepted = system.call("POST", "/api/trace/events", payload={
        "profile": "query_tool", "container_ids": traced, "domains": ["history"]})
    job_id = accepted["job_id"]

    # The job appears, and its bar moves while it runs (over server-sent events).
    WebDriverWait(browser, 10).until(lambda b: b.find_elements(By.ID, f"job-{job_id}"))
    first = wait_for(lambda: v if (v := units_shown(browser, job_id)) >= 1 else None, 20, interval_s=0.05,
                     message="the first units settled on the page")
    later = wait_for(lambda: v if (v := units_shown(browser, job_id)) > first else None, 20, interval_s=0.05,
                     message="the progress bar moving")
    row = browser.find_element(By.ID, f"job-{job_id}")
    assert row.get_attribute("data-state") == "running"
    # the rows column moves with the bar (it stayed at the first poll's value)
    def rows_at() -> int:
        for _ in range(5):
            try:
                text = browser.find_element(By.CSS_SELECTOR, f"#job-{job_id} .job-rows").text.replace(",", "")
                return int(text) if text.isdigit() else 0
            except StaleElementReferenceException:
                continue
        raise AssertionError("the row kept being replaced")
    # The events move it: three values within less than one poll period (2 s), which polling
    # alone cannot show (at most one change per period); watched until seen, as a loaded
    # machine runs the job slower.
    import time
    readings: list[tuple[float, int]] = []

    def moved_between_polls():
        now = time.monotonic()
        readings.append((now, rows_at()))
        return len({v for t, v in readings if now - t < 1.9}) >= 3
    wait_for(moved_between_polls, 20, interval_s=0.05,
             message=f"three rows counts within 1.9 s (seen {sorted({v for _, v in readings})})")
    assert int(browser.find_element(By.ID, f"progress-{job_id}").get_property("max")) == units
    assert later < units
    # The queue's rate is computed by the page from two readings of the counters.
    rate = wait_for(lambda: c if (c := fresh(lambda: browser.find_elements(
        By.CSS_SELECTOR, "#queues-body tr[data-queue='trace-events'] td")[6].text)) not in ("–", "0.0") else None,
        10, interval_s=0.2, message="a processed/s rate on the trace queue")
    assert float(rate) > 0

    row.find_element(By.CSS_SELECTOR, "button.cancel").click()

    WebDriverWait(browser, 10).until(
        lambda b: b.find_element(By.ID, f"job-{job_id}").get_attribute("data-state") == "cancelled")
    status = system.call("GET", f"/api/trace/job/{job_id}")
    assert (status["status"], status["code"], status["state"]) == ("failed", "JOB_CANCELLED", "cancelled")
    assert "JOB_CANCELLED" in browser.find_element(By.ID, f"job-{job_id}").text
    assert not browser.find_element(By.ID, f"job-{job_id}").find_element(By.CSS_SELECTOR, "button.cancel").is_displayed()
    assert f"/api/trace/job/{job_id}/events" in system.access_log.read_text()  # the page followed the stream
    assert script_errors(browser) == []


def test_the_retry_button_runs_a_cancelled_job_again_to_its_end(system, browser, sample_db):
    job_id = system.call("POST", "/api/trace/events", payload={
        "profile": "query_tool", "container_ids": cids(sample_db)[740:980], "domains": ["history"]})["job_id"]
    system.call("POST", f"/api/v1/jobs/{job_id}/cancel")
    sign_in(browser, system, "alice")

    wait = WebDriverWait(browser, 30)
    wait.until(lambda b: b.find_element(By.ID, f"job-{job_id}").get_attribute("data-state") == "cancelled")
    browser.find_element(By.ID, f"job-{job_id}").find_element(By.CSS_SELECTOR, "button.retry").click()

    wait.until(lambda b: b.find_element(By.ID, f"job-{job_id}").get_attribute("data-state") == "completed")
    assert system.call("GET", f"/api/trace/job/{job_id}")["status"] == "completed"
    assert units_shown(browser, job_id) == 12
    assert script_errors(browser) == []


def test_a_completed_jobs_first_page_and_an_operators_dead_letters(system, browser, sample_db):
    accepted = system.call("POST", "/api/trace/events", user="ops", payload={
        "profile": "query_tool", "container_ids": cids(sample_db)[500:740], "domains": ["history"]})
    job_id = accepted["job_id"]
    sign_in(browser, system, "ops")
    # A message no worker can run: the worker dead-letters it (unknown actor).
    broker = Broker(ApiSettings.from_env(system.env))
    try:
        broker.enqueue(Message("trace-events", "no_such_actor", (1,), {}, {}))
    finally:
        broker.close()

    wait = WebDriverWait(browser, 30)
    wait.until(lambda b: b.find_element(By.ID, f"job-{job_id}").get_attribute("data-state") == "completed")
    browser.set_window_size(900, 1000)  # narrower than the result table
    try:
        table_width = ("return document.getElementById('job-%s').closest('table')"
                       ".getBoundingClientRect().width" % job_id)
        before = browser.execute_script(table_width)
        browser.find_element(By.ID, f"job-{job_id}").find_element(By.CSS_SELECTOR, "button.show-result").click()
        wait.until(expected_conditions.text_to_be_present_in_element((By.ID, f"result-{job_id}"), "rows 1–20 of"))
        assert len(browser.find_elements(By.CSS_SELECTOR, f"#result-{job_id} .result-table tbody tr")) == 20
        # the result table scrolls in its box; the jobs table around it does not widen
        box = browser.execute_script(
            "const s = document.querySelector('#result-%s .scroll'); return [s.scrollWidth, s.clientWidth];"
            % job_id)
        after = browser.execute_script(table_width)
        assert after <= before + 1 and box[0] > box[1], (before, after, box)
    finally:
        browser.set_window_size(1400, 1000)

    def purge_the_record():  # found again if the dead-letter table was repainted meanwhile
        record = wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#dead-body tr.dead"))[0]
        assert "no_such_actor" in record.text
        record.find_element(By.CSS_SELECTOR, "button[data-action='purge']").click()
    fresh(purge_the_record)
    WebDriverWait(browser, 5).until(expected_conditions.alert_is_present()).accept()
    wait.until(expected_conditions.text_to_be_present_in_element((By.ID, "dead-body"), "No dead-lettered message"))
    assert script_errors(browser) == []


def test_the_page_reads_the_enveloped_answers_of_an_api_that_wraps_them(system, sample_db, tmp_path, browser):
    # Only the API differs: a gunicorn that wraps its answers, over the module's Redis and workers.
    wrapping = Enveloping(system, tmp_path)
    try:
        wrapping.wait_ready()
        job_id = wrapping.call("POST", "/api/trace/events", payload={
            "profile": "query_tool", "container_ids": cids(sample_db)[:240], "domains": ["history"]})["job_id"]
        sign_in(browser, wrapping, "alice")

        wait = WebDriverWait(browser, 30)
        wait.until(lambda b: b.find_element(By.ID, f"job-{job_id}").get_attribute("data-state") == "completed")
        wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#workers-body tr[data-consumer]")) == 2)
        wait.until(expected_conditions.text_to_be_present_in_element((By.ID, "redis-body"), "noeviction"))
        assert int(browser.find_element(By.ID, f"progress-{job_id}").get_property("value")) == 12
        assert script_errors(browser) == []
    finally:
        wrapping.stop()
