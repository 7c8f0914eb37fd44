"""Running a server process: event loop (uvloop when installed), signals, clean shutdown."""

from __future__ import annotations

import asyncio
import faulthandler
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

STOP_REPORT_S = 10.0
"""A stop still going after this long prints the stack of every thread and every pending task
to stderr, once: a server that does not exit on SIGTERM says where it waits before the
kubelet's (or a test's) SIGKILL leaves nothing to read."""


def _report_tasks(after_s: float) -> None:
    log.warning("still stopping after %.1fs; pending tasks:", after_s)
    lines: list[str] = []
    for task in asyncio.all_tasks():
        lines.append(f"{task!r} waits in:")
        awaited: object = task.get_coro()
        while frame := getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None):
            code = frame.f_code
            lines.append(f"  {code.co_filename}:{frame.f_lineno} {code.co_name}")
            awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    # one write: faulthandler's timer thread dumps the threads' stacks at the same moment,
    # straight to the file descriptor, and must not land inside a task's chain
    sys.stderr.write("".join(f"{line}\n" for line in lines))
    sys.stderr.flush()


def run_until_signalled(
    start: Callable[[], Awaitable[str]],
    stop: Callable[[], Awaitable[None]],
    name: str,
    *,
    report_after_s: float = STOP_REPORT_S,
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
        # threads too, and past the loop: asyncio.run then waits for its executor's threads
        faulthandler.dump_traceback_later(report_after_s, file=sys.stderr)
        report = loop.call_later(report_after_s, _report_tasks, report_after_s)
        try:
            await stop()
        finally:
            report.cancel()

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
    faulthandler.cancel_dump_traceback_later()
    return 0
