"""Running a server process: event loop (uvloop when installed), signals, clean shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


SWITCH_INTERVAL_S = 0.0005
"""How long a thread waiting for the GIL lets the running one keep it (CPython's default is
5 ms). The store's flush thread finishes an fsync while the event loop is busy with requests;
under Sync flush every producer waits until that thread gets the GIL back to release the
waiters. At 0.5 ms, 8 producer threads sending synchronously got 22 % more messages through and
a p99 of 5 ms instead of 9 ms (bench/RESULTS.md)."""


def run_until_signalled(
    start: Callable[[], Awaitable[str]], stop: Callable[[], Awaitable[None]], name: str
) -> int:
    """Start a server, print where it listens, and stop it cleanly on SIGTERM or SIGINT.

    ``start`` returns the address it listens on; the line ``<name> listening on <address>``
    goes to stdout so scripts and tests can wait for it.
    """

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)
        address = await start()
        print(f"{name} listening on {address}", flush=True)
        await stopping.wait()
        log.info("%s stopping", name)
        await stop()

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        if sys.version_info >= (3, 12):
            uvloop.run(main())
        else:
            uvloop.install()
            asyncio.run(main())
    return 0
