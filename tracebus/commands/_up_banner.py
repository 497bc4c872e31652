"""What ``tracebus up`` prints once the system answers: where the API is and how to use it.

The banner names the API and its OpenAPI document, the workers, a curl example that submits
the sample's five-month trace set and follows its job (:func:`curl_example`; tests run it as
printed), the monitor page, and what the settings mean for callers (tokens, trusted proxies).
Not a command (``tracebus/cli.py`` skips modules whose name starts with ``_``).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from api.settings import ApiSettings

#: The domains of the banner's example request (the MSD page's).
EXAMPLE_DOMAINS = ("upstream_history", "materials")


def curl_example(base_url: str, db: Path | str | None) -> list[str]:
    """Shell lines that submit the station's five-month trace set and follow the job.

    They name no user: the caller is then ``anon:127.0.0.1``, as the web monitor opened on the
    same machine is, so the monitor shows the example's jobs.

    The profile is one the registry answers with the rows of the MSD domains
    (:func:`tracebus.trace.installed.rows_profile`): the MSD profile's request is the MSD analysis
    job, which answers an aggregation and no rows (MSD.md §3).
    """
    from tracebus.trace import installed

    py = shlex.quote(sys.executable)
    request = {"profile": installed.rows_profile(EXAMPLE_DOMAINS), "domains": list(EXAMPLE_DOMAINS)}
    fields = json.dumps(request).removesuffix("}")  # the ids are read by the line, from its input
    body = f'import json, sys; print(json.dumps({fields}, "container_ids": sys.stdin.read().split()}}))'
    # A Path is the sample file; a str is already shell text (PostgreSQL's URL, kept out of sight).
    db_arg = (db if isinstance(db, str) else shlex.quote(str(db))) if db is not None else "<your sample.db>"
    return [
        f"{py} -m tracebus sample-data cids --db {db_arg} \\",
        f"  | {py} -c {shlex.quote(body)} \\",
        f"  | curl -s -X POST {base_url}/api/trace/events -H 'Content-Type: application/json' "
        "--data-binary @-",
    ]


def banner(base_url: str, db: Path | str | None, settings: ApiSettings, processes: int, scale: float) -> str:
    job = f"{base_url}/api/trace/job/<job_id>"
    lines = [
        "", f"tracebus is up: API at {base_url} (OpenAPI: {base_url}/openapi.json), "
            f"{processes} worker process(es) on queue {settings.queue}", "",
        f"Submit the TMTT five-month trace (about {round(114_000 * scale):,} CIDs at scale {scale}; "
        f"above {settings.async_cid_threshold} CIDs it runs as a job):",
        *("  " + line for line in curl_example(base_url, db)),
        "Then, with the job_id it answers (in data.job_id: the dashboard's routes answer in its envelope):",
        f"  curl -s {job}                      # status",
        f"  curl -sN {job}/events              # progress (server-sent events)",
        f"  curl -s '{job}/result?domain=upstream_history&offset=0&limit=5'",
        f"  curl -sN {job}/stream | head -c 2000",
        f"The monitor, {base_url}/ui, shows these jobs: the page and these commands are the same "
        "anonymous caller (anon:127.0.0.1).",
    ]
    if settings.api_tokens or settings.api_tokens_file:
        lines.append("Bearer tokens are configured: add -H 'Authorization: Bearer <token>' to each.")
    if settings.trusted_proxies:
        lines.append(f"TRACEBUS_TRUSTED_PROXIES={settings.trusted_proxies}: requests from there may name a user "
                     f"(-H '{settings.user_header}: NAME') and a client address (X-Forwarded-For)"
                     + (", with X-Proxy-Token." if settings.proxy_token or settings.api_tokens
                        or settings.api_tokens_file else "."))
    else:
        lines.append(f"No proxy is trusted: a {settings.user_header} header is ignored (set "
                     "TRACEBUS_TRUSTED_PROXIES=127.0.0.1,::1 to let local callers name a user).")
    lines += [
        "Ctrl-C stops everything.", "",
    ]
    return "\n".join(lines)
