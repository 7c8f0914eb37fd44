"""All consume queues of a store, keyed by (topic, queue id), under ``consumequeue/``."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

from reconsume.store.consume_queue import ConsumeQueue


class QueueTable:
    def __init__(self, root: Path, entries_per_file: int, *, preallocate: bool) -> None:
        self.root = root
        self.entries_per_file = entries_per_file
        self.preallocate = preallocate
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        root.mkdir(parents=True, exist_ok=True)
        for topic_dir in sorted(root.iterdir()):
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                if queue_dir.is_dir() and queue_dir.name.isdigit():
                    queue_id = int(queue_dir.name)
                    self.queues[(topic_dir.name, queue_id)] = ConsumeQueue(
                        queue_dir, topic_dir.name, queue_id, entries_per_file, preallocate
                    )

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue = self.queues.get((topic, queue_id))
        if queue is None:
            queue = ConsumeQueue(
                self.root / topic / str(queue_id),
                topic,
                queue_id,
                self.entries_per_file,
                self.preallocate,
            )
            self.queues[(topic, queue_id)] = queue
        return queue

    def of_topic(self, topic: str) -> list[ConsumeQueue]:
        return sorted(
            (q for (t, _), q in self.queues.items() if t == topic), key=lambda q: q.queue_id
        )

    def topics(self) -> set[str]:
        return {topic for topic, _ in self.queues}

    def delete_topic(self, topic: str) -> int:
        """Remove every queue of ``topic``; returns how many there were."""
        doomed = [key for key in self.queues if key[0] == topic]
        for key in doomed:
            self.queues.pop(key).destroy()
        shutil.rmtree(self.root / topic, ignore_errors=True)
        return len(doomed)

    def __iter__(self) -> Iterator[ConsumeQueue]:
        return iter(list(self.queues.values()))

    def __len__(self) -> int:
        return len(self.queues)

    def close(self) -> None:
        for queue in self.queues.values():
            queue.close()
