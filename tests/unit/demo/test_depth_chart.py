"""The demo's chart: a PNG of the right size, whatever the samples."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

from reconsume.demo.depth_chart import HEIGHT_PX, WIDTH_PX, Marker, Sample, render
from reconsume.errors import ReconsumeError

pytest.importorskip("matplotlib")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

MARKERS = (
    Marker(5.0, "payment service down"),
    Marker(20.0, "Drain job"),
    Marker(30.0, "payment service up"),
    Marker(40.0, "Reprocess job"),
)


def outage(seconds: int = 50) -> list[Sample]:
    """Retries pile up while the payment service is down, then drain."""
    samples = []
    waiting = dlq = consumed = 0
    for step in range(seconds * 2):
        t = step / 2
        if 5 <= t < 30:
            waiting = min(waiting + 7, 120)
            dlq += 1 if t > 12 else 0
        else:
            waiting = max(waiting - 20, 0)
            consumed += 12
            if t >= 40:
                dlq = max(dlq - 5, 0)
        samples.append(Sample(t, waiting, waiting // 4, dlq, consumed))
    return samples


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    # The first chunk is IHDR: length (4), type (4), then width and height, big-endian.
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_render_writes_a_png_of_the_expected_size(tmp_path: Path) -> None:
    path = tmp_path / "demo.png"
    result = render(outage(), MARKERS, path, title="Orders during an outage", group="orders")
    assert result == path
    assert png_size(path) == (WIDTH_PX, HEIGHT_PX) == (1200, 600)


@pytest.mark.parametrize("markers", [(), MARKERS], ids=["bare", "with-markers"])
def test_no_samples_still_make_a_png(tmp_path: Path, markers: tuple[Marker, ...]) -> None:
    path = render([], markers, tmp_path / "empty.png", title="Nothing yet", group="orders")
    assert png_size(path) == (WIDTH_PX, HEIGHT_PX)


def test_a_single_sample_is_drawn(tmp_path: Path) -> None:
    path = render([Sample(0.0, 1, 2, 3, 4)], [], tmp_path / "one.png", title="t", group="g")
    assert png_size(path) == (WIDTH_PX, HEIGHT_PX)


def test_different_samples_make_different_images(tmp_path: Path) -> None:
    calm = [Sample(step / 2, 0, 0, 0, step * 10) for step in range(100)]
    first = render(outage(), MARKERS, tmp_path / "outage.png", title="t", group="orders")
    second = render(calm, MARKERS, tmp_path / "calm.png", title="t", group="orders")
    assert first.read_bytes() != second.read_bytes()


def test_samples_may_come_in_any_order(tmp_path: Path) -> None:
    samples = outage()
    ordered = render(samples, MARKERS, tmp_path / "ordered.png", title="t", group="orders")
    shuffled = samples[1::2] + samples[::2]
    unordered = render(shuffled, MARKERS, tmp_path / "unordered.png", title="t", group="orders")
    assert ordered.read_bytes() == unordered.read_bytes()


def test_no_pyplot_is_involved(tmp_path: Path) -> None:
    pyplot_before = "matplotlib.pyplot" in sys.modules
    render(outage(), MARKERS, tmp_path / "demo.png", title="t", group="orders")
    assert ("matplotlib.pyplot" in sys.modules) == pyplot_before


def test_without_matplotlib_the_error_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ReconsumeError, match=r"reconsume\[demo\]"):
        render(outage(), MARKERS, tmp_path / "demo.png", title="t", group="orders")
    assert not (tmp_path / "demo.png").exists()
