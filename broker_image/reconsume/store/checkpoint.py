"""The store checkpoint: where recovery may start scanning the commit log.

Invariant: every record below ``commit_log_offset`` is durable in the commit log *and* has
its consume-queue entry durable. The flush thread writes it after flushing both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reconsume.store.atomic import read_json, write_json


@dataclass(frozen=True, slots=True)
class Checkpoint:
    commit_log_offset: int
    """Records below this offset are durable and dispatched."""
    clean_shutdown: bool
    """True when written by a normal close; recovery then has nothing to scan."""
    time_ms: int

    @classmethod
    def load(cls, path: Path) -> Checkpoint | None:
        try:
            document = read_json(path)
        except Exception:  # noqa: BLE001 - a damaged checkpoint only costs a full scan
            return None
        if not isinstance(document, dict):
            return None
        offset = document.get("commitLogOffset")
        if not isinstance(offset, int) or offset < 0:
            return None
        return cls(
            commit_log_offset=offset,
            clean_shutdown=document.get("cleanShutdown") is True,
            time_ms=int(document.get("timeMs", 0)),
        )

    def save(self, path: Path) -> None:
        write_json(
            path,
            {
                "commitLogOffset": self.commit_log_offset,
                "cleanShutdown": self.clean_shutdown,
                "timeMs": self.time_ms,
            },
        )
