"""Profile the Async append hot path: ``python -m bench.profile_append [--batch] [-n N]``.

Runs put() (or put_batch of 32) on a fresh store under cProfile and prints the top functions
by own time; with ``--pyspy`` it only runs the loop (for ``py-spy record -- python -m ...``).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from bench.common import DEFAULT_OUT, Sizes, body_of, data_dir, make_requests
from reconsume.store.settings import FlushMode
from reconsume.store.store import MessageStore


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=300_000)
    parser.add_argument("--batch", action="store_true")
    parser.add_argument("--no-profile", action="store_true", help="just time the loop")
    args = parser.parse_args()
    sizes = Sizes.full()
    requests = make_requests(args.n, body_of(1024))
    with data_dir(DEFAULT_OUT / "data", "profile") as directory:
        store = MessageStore(directory, sizes.settings(flush_mode=FlushMode.ASYNC))
        try:
            profiler = None if args.no_profile else cProfile.Profile()
            started = time.perf_counter()
            if profiler is not None:
                profiler.enable()
            if args.batch:
                for i in range(0, len(requests), 32):
                    store.put_batch(requests[i : i + 32])
            else:
                put = store.put
                for request in requests:
                    put(request)
            if profiler is not None:
                profiler.disable()
            elapsed = time.perf_counter() - started
        finally:
            store.close()
    print(f"{args.n / elapsed:,.0f} msg/s ({elapsed / args.n * 1e6:.2f} us/msg)")
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
