"""The timer service's progress: which timer-topic entries are delivered, and where a restart
must look for deliveries it is about to repeat.

Timer entries are appended in send order but fall due in any order, so a single offset (as
for a delay level) cannot say what is delivered. :class:`DeliveredSet` is a *low-water mark*
``low`` (every consume-queue offset below it is delivered) plus a bitmap of the offsets at or
above it delivered out of order. Adding the offset at ``low`` advances the mark over the run
of set bits after it and bytes below the mark are dropped, so memory is one bit per entry
between the oldest undelivered entry and the newest, whatever the delays.

:class:`TimerProgress` is what ``config/timerProgress.json`` holds (atomically replaced,
with a ``.bak`` of the previous version)::

    {"lowWater": L, "bitmapBase": B, "bitmap": "<base64 of zlib of the bitmap>",
     "redeliveryScanFrom": W}

bit ``i`` of the bitmap is offset ``B + i`` (``B <= L``, bits below ``L`` mean nothing);
``W`` is a commit-log offset no delivery of an entry outside the set lies below (see
:mod:`reconsume.engine.redelivery`).
"""

from __future__ import annotations

import base64
import zlib
from dataclasses import dataclass
from pathlib import Path

from reconsume.errors import TableError
from reconsume.store.atomic import read_json, write_json

TRIM_BYTES = 4096
"""Bitmap bytes below the low-water mark are dropped once there are this many."""
PROGRESS_FILE = "timerProgress.json"


class DeliveredSet:
    """Offsets delivered: all below :attr:`low`, and the set bits of a bitmap above it."""

    __slots__ = ("_base", "_bits", "low")

    def __init__(self, low: int = 0, base: int | None = None, bits: bytes = b"") -> None:
        self.low = low
        """Every offset below this one is delivered."""
        self._base = low if base is None else base
        """Offset of bit 0 of ``_bits``; never above ``low``."""
        self._bits = bytearray(bits)
        if self._base > low:
            raise ValueError(f"bitmap base {self._base} above the low-water mark {low}")
        self._advance()

    def __contains__(self, offset: object) -> bool:
        if not isinstance(offset, int):
            return False
        if offset < self.low:
            return True
        index = offset - self._base
        byte = index >> 3
        return byte < len(self._bits) and bool(self._bits[byte] >> (index & 7) & 1)

    def add(self, offset: int) -> None:
        if offset < self.low:
            return
        index = offset - self._base
        byte = index >> 3
        bits = self._bits
        if byte >= len(bits):
            bits.extend(bytes(byte - len(bits) + 64))
        bits[byte] |= 1 << (index & 7)
        if offset == self.low:
            self._advance()

    def _advance(self) -> None:
        bits = self._bits
        base = self._base
        low = self.low
        size = len(bits)
        while True:
            index = low - base
            byte = index >> 3
            if byte >= size:
                break
            value = bits[byte]
            if value == 0xFF and not index & 7:
                low += 8
            elif value >> (index & 7) & 1:
                low += 1
            else:
                break
        self.low = low
        drop = (low - base) >> 3
        if drop >= TRIM_BYTES:
            del bits[:drop]
            self._base = base + 8 * drop

    def snapshot(self) -> tuple[int, int, bytes]:
        """``(low, base, bitmap)`` with the bitmap starting at the byte holding ``low``."""
        skip = (self.low - self._base) >> 3
        end = len(self._bits)
        while end > skip and not self._bits[end - 1]:
            end -= 1
        return self.low, self._base + 8 * skip, bytes(self._bits[skip:end])


@dataclass(frozen=True, slots=True)
class TimerProgress:
    """A snapshot of the timer service's progress, as persisted."""

    low_water: int
    bitmap_base: int
    bitmap: bytes
    redelivery_scan_from: int | None
    """None when never written (nothing to scan for)."""

    def delivered(self) -> DeliveredSet:
        return DeliveredSet(self.low_water, self.bitmap_base, self.bitmap)

    def to_dict(self) -> dict[str, object]:
        document: dict[str, object] = {
            "lowWater": self.low_water,
            "bitmapBase": self.bitmap_base,
            "bitmap": base64.b64encode(zlib.compress(self.bitmap, 1)).decode(),
        }
        if self.redelivery_scan_from is not None:
            document["redeliveryScanFrom"] = self.redelivery_scan_from
        return document

    @classmethod
    def from_dict(cls, document: object) -> TimerProgress:
        if not isinstance(document, dict):
            raise TableError(f"timer progress is not an object: {document!r}")
        try:
            low = _int(document, "lowWater")
            base = _int(document, "bitmapBase")
            encoded = str(document.get("bitmap") or "")
            bitmap = zlib.decompress(base64.b64decode(encoded, validate=True)) if encoded else b""
            scan = document.get("redeliveryScanFrom")
        except (ValueError, zlib.error) as exc:
            raise TableError(f"timer progress is damaged: {exc}") from exc
        if base > low or (
            scan is not None and (isinstance(scan, bool) or not isinstance(scan, int))
        ):
            raise TableError(f"timer progress is inconsistent: {document!r}")
        return cls(low, base, bitmap, scan)

    @classmethod
    def empty(cls) -> TimerProgress:
        return cls(0, 0, b"", None)


def _int(document: dict[str, object], name: str) -> int:
    value = document.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} is not a non-negative integer: {value!r}")
    return value


def progress_path(config_dir: Path) -> Path:
    return config_dir / PROGRESS_FILE


def load_progress(path: Path) -> TimerProgress:
    """The persisted progress (the ``.bak`` copy when the file is damaged); empty when none."""
    document = read_json(path)
    return TimerProgress.empty() if document is None else TimerProgress.from_dict(document)


def save_progress(path: Path, progress: TimerProgress) -> None:
    """Replace the file atomically (temp file, fsync, rename)."""
    write_json(path, progress.to_dict())
