"""``reconsume up``: embedded mode in the foreground until Ctrl-C (or SIGTERM)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from reconsume.embedded.environment import Environment, ManifestsInvalid
from reconsume.embedded.processes import ChildError
from reconsume.errors import InvalidArgumentError

log = logging.getLogger(__name__)


async def run(
    data_dir: Path,
    paths: Sequence[Path],
    *,
    recursive: bool = False,
    namesrv_port: int = 9876,
    interval_s: float = 2.0,
    out: TextIO = sys.stdout,
) -> int:
    """Start, then re-read and reconcile every ``interval_s`` until SIGINT/SIGTERM; stop
    everything in order. Exit status 0, or 2 when the manifests are invalid at start."""
    environment = Environment(data_dir, paths, recursive=recursive, namesrv_port=namesrv_port)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    try:
        try:
            await environment.start()
        except ManifestsInvalid as exc:
            print("reconsume up: invalid manifests, nothing started:", file=sys.stderr)
            for problem in exc.problems:
                print(f"  {problem}", file=sys.stderr)
            return 2
        except (InvalidArgumentError, ChildError, OSError) as exc:
            print(f"reconsume up: {exc}", file=sys.stderr)
            await environment.stop()
            return 1
        _announce(environment, out)
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval_s):
                    await stopping.wait()
            if stopping.is_set():
                break
            try:
                await environment.supervise()
                await environment.sync()
            except (InvalidArgumentError, ChildError) as exc:
                # A path removed while running, a process that does not come back: said, and
                # tried again next pass; everything else keeps running.
                log.error("%s", exc)  # noqa: TRY400 - the message says it all
        print("reconsume up: stopping", file=out, flush=True)
        await environment.stop()
        print("reconsume up: stopped", file=out, flush=True)
        return 0
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _announce(environment: Environment, out: TextIO) -> None:
    for (_, name), cluster in sorted(environment.clusters.items()):
        if cluster.spec.external:
            print(f"cluster {name}: external, name server {cluster.name_server}", file=out)
        else:
            brokers = cluster.describe_brokers()
            print(f"cluster {name}: name server {cluster.name_server}; brokers {brokers}", file=out)
    for key, state in sorted(environment.objects.items()):
        print(f"{key[0].lower()}/{key[2]}: {state.reason} {state.message}".rstrip(), file=out)
    for line in environment.ignored:
        print(f"ignored (not a reconsume kind): {line}", file=out)
    print(
        f"reconsume up: running (data in {environment.data_dir}); `reconsume status` shows "
        "groups and jobs; Ctrl-C stops",
        file=out,
        flush=True,
    )
