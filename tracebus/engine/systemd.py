"""systemd's readiness protocol (``Type=notify`` units): one datagram to ``$NOTIFY_SOCKET``.

The supervisor says ``READY=1`` once its first workers are forked and ``STOPPING=1`` when it
ends, so ``systemctl start`` waits for a pool that runs (``deploy/`` units); without a
notify socket (not under systemd) it does nothing.
"""

from __future__ import annotations

import logging
import socket

# The supervisor's logger: these lines are the supervisor's, as they were before the split.
log = logging.getLogger("tracebus.engine.supervisor")


def sd_notify(path: str | None, state: bytes) -> None:
    """Send ``state`` to the notify socket at ``path`` (``@`` starts an abstract one); a
    failure is logged, never raised."""
    if not path:
        return
    if path.startswith("@"):
        path = "\0" + path[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        try:
            s.connect(path)
            s.sendall(state)
        except OSError as e:
            log.warning("sd_notify failed: %s", e)
