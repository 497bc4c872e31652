"""Write deploy/tracebus.env from the settings of every layer: each setting, its doc and its default.

    .venv/bin/python deploy/render_env.py > deploy/tracebus.env

tests/test_deploy.py fails when the file and this output differ, so a setting added to
a settings class shows up here. :data:`DEPLOY_VALUES` are the few values the units are sized
for (they differ from the library's defaults on purpose, and say so in the file).
"""

from __future__ import annotations

import sys
import textwrap

from api.ratelimit import default_limits
from api.settings import ApiSettings

#: Variables whose deployed value differs from the default: (value, why).
DEPLOY_VALUES: dict[str, tuple[str, str]] = {
    "TRACE_WORKER_COUNT": ("4", "MemoryHigh/MemoryMax in tracebus-worker.service are sized for "
                                "4 workers x TRACEBUS_WORKER_MAX_RSS_MB; change them together."),
    "TRACEBUS_WORKER_MAX_RSS_MB": ("768", "the per-worker limit MemoryHigh/MemoryMax in "
                                          "tracebus-worker.service are sized from."),
    "TRACEBUS_SQLITE_PATH": ("/var/lib/tracebus/sample.db",
                             "the units' StateDirectory, owned by the service user, whatever folder a "
                             "command runs in (only read with TRACEBUS_SOURCE=sqlite)."),
}

#: Variables set by systemd itself: listed, commented out, never assigned here (an
#: EnvironmentFile value would override the socket systemd passes).
SET_BY_SYSTEMD = {"NOTIFY_SOCKET"}

#: Descriptions for the settings whose declaration carries none.
EXTRA_DOCS = {
    "TRACEBUS_ORACLE_USER": "Oracle user.",
    "TRACEBUS_ORACLE_PASSWORD": "Oracle password (this file is mode 0640 for that reason).",
    "TRACEBUS_LOG_FORMAT": "text (one human-readable line per event) or json (one JSON object per line).",
    "TRACEBUS_LOG_LEVEL": "debug, info, warning or error.",
}

HEADER = """\
# /etc/tracebus/tracebus.env: every tracebus setting, read by tracebus-worker.service and
# tracebus-api.service (EnvironmentFile=). Install it root:tracebus, mode 0640: it may hold
# the Oracle password and API tokens.
#
# Generated from the settings of every layer by deploy/render_env.py; every value is the default
# unless marked "deploy value"; an empty value means the default. Settings are read at
# start: restart the services after a change (a reload does not re-read this file).
# Units are in the names: _MS milliseconds, _SECONDS seconds, _MB megabytes.
"""


def _value(raw) -> str:
    text = str(raw)
    if any(c.isspace() for c in text) or '"' in text or "\\" in text:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def render() -> str:
    """The whole file."""
    out = [HEADER]
    for variable, default, doc in ApiSettings.documented():
        doc = doc or EXTRA_DOCS.get(variable, "")
        if variable == "TRACEBUS_RATE_LIMITS":  # the buckets: the API's own and those the kinds' routes declare
            doc += " Buckets and defaults: " + ", ".join(
                f"{name}={limit.max_hits}/{limit.window_s}" for name, limit in default_limits().items()) + "."
        lines = textwrap.wrap(doc, 94, break_on_hyphens=False) if doc else []
        if variable in SET_BY_SYSTEMD:
            lines.append("Never set it in this file: it would replace the socket systemd passes.")
            out.append("\n".join(f"# {line}" for line in lines) + f"\n# {variable}=\n")
            continue
        value = default
        if variable in DEPLOY_VALUES:
            value, why = DEPLOY_VALUES[variable]
            lines += textwrap.wrap(f"Deploy value (default {default}): {why}", 94)
        out.append("\n".join(f"# {line}" for line in lines) + f"\n{variable}={_value(value)}\n")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(render())
