"""The bare Async append loop, for instruction counting under valgrind (see bench/compare.py).

    python -m bench.append_loop N [--batch] [--dry]

Opens a store without its background thread on a pre-faulted segment and appends N prepared
1 KiB messages (with ``--dry`` it prepares them and appends nothing). The difference of the
instruction counts of a run and its dry run, divided by N, is the store's instructions per
message: deterministic, unlike timings on a shared machine.
"""

from __future__ import annotations

import argparse

from bench.common import DEFAULT_OUT, Sizes, body_of, data_dir, make_requests, stored_size
from bench.store_append import BATCH, _prefault
from reconsume.store.settings import FlushMode
from reconsume.store.store import MessageStore


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", type=int)
    parser.add_argument("--batch", action="store_true", help=f"put_batch of {BATCH}")
    parser.add_argument("--dry", action="store_true", help="prepare but do not append")
    args = parser.parse_args()
    sizes = Sizes.full()
    requests = make_requests(args.n, body_of(sizes.body_bytes))
    with data_dir(DEFAULT_OUT / "data", "loop") as directory:
        store = MessageStore(
            directory, sizes.settings(flush_mode=FlushMode.ASYNC), background=False
        )
        try:
            _prefault(store.commitlog.active.mm, args.n * stored_size(sizes.body_bytes) + 4096)
            if args.dry:
                pass
            elif args.batch:
                for i in range(0, len(requests), BATCH):
                    store.put_batch(requests[i : i + BATCH])
            else:
                for request in requests:
                    store.put(request)
        finally:
            store.close()


if __name__ == "__main__":
    main()
