"""A server process that does not finish stopping says where it waits."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SERVER = textwrap.dedent(
    """
    import asyncio, logging, os, signal
    from reconsume.runtime import run_until_signalled

    async def start() -> str:
        asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signal.SIGTERM)
        return "nowhere"

    async def flush_slowly() -> None:
        await asyncio.sleep(1.5)

    async def stop() -> None:
        await flush_slowly()

    logging.basicConfig()
    raise SystemExit(run_until_signalled(start, stop, "slow", report_after_s=0.3))
    """
)


def test_a_slow_stop_prints_the_stacks_of_its_threads_and_tasks_and_still_exits_cleanly() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SERVER], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "slow listening on nowhere" in done.stdout
    err = done.stderr
    assert "still stopping after 0.3s" in err
    assert "Timeout (0:00:00.300000)!" in err  # every thread's stack, from faulthandler
    # the await chain down to where the stop waits: the indented lines after "waits in:" (the
    # faulthandler's timer thread and the loop's report fire together, in either order)
    lines = err.splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith(" waits in:")) + 1
    chain: list[str] = []
    for line in lines[start:]:
        if not line.startswith("  "):
            break
        chain.append(line.split()[-1])
    assert chain[-4:] == ["main", "stop", "flush_slowly", "sleep"], err


def test_a_quick_stop_prints_nothing() -> None:
    quick = SERVER.replace("asyncio.sleep(1.5)", "asyncio.sleep(0)")
    done = subprocess.run(
        [sys.executable, "-c", quick], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
