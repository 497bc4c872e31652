"""``tracebus jobs [list|show|cancel|retry]``: trace jobs (``list`` the default), as an operator sees them (every user's)."""

from __future__ import annotations

from tracebus.commands._common import (fmt_duration, fmt_time, int_at_least, open_service, print_json, table)
from tracebus.commands.status import JOB_STATES

#: Public statuses (``completed`` includes ``partial``) and internal states accepted by --status.
STATUS_CHOICES = sorted(set(JOB_STATES))


def add_parser(sub) -> None:
    p = sub.add_parser("jobs", help="list, show, cancel or retry trace jobs",
                       description="Trace jobs of every user. Exit code 1 when a job is unknown or "
                                   "cannot be cancelled/retried in its state.")
    # no ACTION: list (as `queues`), with list's defaults
    p.set_defaults(func=run_list, status=None, user=None, limit=50, offset=0, json=False)
    jobs = p.add_subparsers(dest="action", metavar="ACTION")

    ls = jobs.add_parser("list", help="list jobs, newest first (the default)",
                         description="List jobs, newest first.")
    ls.add_argument("--status", choices=STATUS_CHOICES, help="only jobs in this state")
    ls.add_argument("--user", help="only this user's jobs")
    ls.add_argument("--limit", type=int_at_least(1), default=50, help="at most this many (default 50)")
    ls.add_argument("--offset", type=int_at_least(0), default=0, help="skip this many first")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=run_list)

    show = jobs.add_parser("show", help="one job in detail",
                           description="One job: status, progress, domains and (with --units) every unit.")
    show.add_argument("job_id", metavar="JOB")
    show.add_argument("--units", action="store_true", help="also list every unit")
    show.add_argument("--json", action="store_true", help="print the detail document as JSON")
    show.set_defaults(func=run_show)

    cancel = jobs.add_parser("cancel", help="cancel a queued or running job",
                             description="Cancel a queued or running job; running units stop at their "
                                         "next chunk.")
    cancel.add_argument("job_id", metavar="JOB")
    cancel.set_defaults(func=run_cancel)

    retry = jobs.add_parser("retry", help="re-run what failed or was cancelled",
                            description="Re-run the failed and cancelled units of a partial, failed or "
                                        "cancelled job (completed units are kept).")
    retry.add_argument("job_id", metavar="JOB")
    retry.set_defaults(func=run_retry)


def run_list(args, settings) -> int:
    broker, service = open_service(settings)
    page = service.list_jobs(args.user, args.status, args.offset, args.limit)
    broker.close()
    if args.json:
        print_json(page)
        return 0
    if not page["jobs"]:
        print("no jobs")
        return 0
    print(table(("job", "state", "user", "profile", "cids", "units", "rows", "created", "elapsed"),
                [(j["job_id"], j["state"], j["user"], j["profile"], j["cid_count"], _units(j),
                  j["progress"]["rows"], fmt_time(j["created_at"]), fmt_duration(j["elapsed_seconds"]))
                 for j in page["jobs"]]))
    shown = len(page["jobs"])
    if page["total"] > page["offset"] + shown:
        print(f"({shown} of {page['total']}; --offset {page['offset'] + shown} for more)")
    return 0


def run_show(args, settings) -> int:
    broker, service = open_service(settings)
    doc = service.detail(args.job_id)
    broker.close()
    if args.json:
        print_json(doc)
        return 0
    print(describe(doc))
    print()
    print(table(("domain", "state", "units", "rows"),
                [(d["domain"], d["state"], f"{d['units']['done']}/{d['units_total']}", d["rows"])
                 for d in doc["domain_states"]]))
    if args.units:
        print()
        print(table(("unit", "domain", "chunk", "state", "attempt", "rows", "error"),
                    [(u["unit"], u["domain"], u["chunk"], u["state"], u["attempt"], u["rows"],
                      (u["error"] or "")[:60]) for u in doc["units"]]))
    return 0


def run_cancel(args, settings) -> int:
    broker, service = open_service(settings)
    doc = service.cancel(args.job_id)
    broker.close()
    p = doc["progress"]
    print(f"{doc['job_id']}: {doc['state']} ({p['units_done']} of {p['units_total']} units had finished; "
          f"their rows are kept)")
    return 0


def run_retry(args, settings) -> int:
    broker, service = open_service(settings)
    doc = service.retry(args.job_id)
    broker.close()
    print(f"{doc['job_id']}: {doc['state']}, re-running what failed "
          f"(tracebus jobs show {doc['job_id']} to follow it)")
    return 0


def describe(doc: dict) -> str:
    """The header block of one job."""
    p = doc["progress"]
    lines = [
        f"job       {doc['job_id']}",
        f"state     {doc['state']}" + (f" ({doc['code']})" if doc.get("code") else ""),
        f"user      {doc['user']}",
        f"profile   {doc['profile']}   domains {', '.join(doc['domains'])}   cids {doc['cid_count']}",
        f"progress  {p['units_done']}/{p['units_total']} units done, {p['units_failed']} failed, "
        f"{p['rows']} rows ({p['stage']})",
        f"created   {fmt_time(doc['created_at'])}   started {fmt_time(doc['started_at'])}   "
        f"finished {fmt_time(doc['finished_at'])}",
        f"elapsed   {fmt_duration(doc['elapsed_seconds'])}   "
        f"remaining {fmt_duration(doc['estimated_remaining_seconds'])}",
    ]
    if doc.get("failed_domains"):
        lines.append(f"failed    {', '.join(doc['failed_domains'])}")
    if doc.get("error"):
        lines.append(f"error     {doc['error']}")
    return "\n".join(lines)


def _units(doc: dict) -> str:
    p = doc["progress"]
    return f"{p['units_done'] + p['units_failed']}/{p['units_total']}"
