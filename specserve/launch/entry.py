"""The `specserve-launch` console script: a stop that comes before the server starts ends the
launcher at once.

In a container the launcher is PID 1, and the kernel drops every signal PID 1 has no handler
for, `docker stop`'s and the kubelet's SIGTERM included. supervise.py installs its forwarding
handlers only once the profile is validated and rendered; before that (the imports, the checks:
about a second, more on a loaded node) a SIGTERM was lost and the stop waited its whole timeout
(120 s) for SIGKILL. CI saw exactly that when a rollback stopped a rank Docker was restarting.
So the handlers go in first, before the launcher's imports; what is left unguarded is the
interpreter's own start.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def _stop_before_start(signum: int, _frame: FrameType | None) -> None:
    message = (
        f"specserve-launch: {signal.Signals(signum).name} before the server started; "
        "nothing was started, exiting\n"
    )
    try:
        # Never block here: a full stderr pipe must not keep a stopped launcher alive.
        os.set_blocking(2, False)
        os.write(2, message.encode())
    except OSError:
        pass
    os._exit(128 + signum)


def main() -> int:
    for sig in STOP_SIGNALS:
        signal.signal(sig, _stop_before_start)
    from specserve.launch.launcher import main as launch

    return launch()


if __name__ == "__main__":
    sys.exit(main())
