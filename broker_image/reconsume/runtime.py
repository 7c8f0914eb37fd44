"""Running a server process: event loop (uvloop when installed), signals, clean shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


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
