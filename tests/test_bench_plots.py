"""scorer.bench.plots: the PNGs from a synthetic result (what they show is not asserted, only that they are
valid images, named as documented, and skipped when there is nothing to draw)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_bench_report import make_point, synthetic_result

from scorer.bench.plots import PlotsUnavailable, write_plots
from scorer.bench.resultfile import ResultFileError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the PNG's IHDR chunk, after checking the signature."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_writes_the_three_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plots need matplotlib (pip install 'scorer[bench]')")
    paths = write_plots(synthetic_result(), tmp_path / "out")
    assert [path.name for path in paths] == ["latency.png", "throughput.png", "memory.png"]
    for path in paths:
        assert path.parent == tmp_path / "out"
        width, height = png_size(path)
        assert width > 600 and height > 300


def test_skips_a_plot_with_nothing_to_draw(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plots need matplotlib (pip install 'scorer[bench]')")
    points = [make_point("plain", n) for n in (100, 500)] + [make_point("plain", 1000, error="killed")]
    for point in points:
        point["memory"] = None
        point["throughput"]["pods_per_second"] = None
    result = {"points": points}  # no machine, no version: the titles say so
    assert [path.name for path in write_plots(result, tmp_path)] == ["latency.png"]
    assert write_plots({"points": [make_point("plain", 100, error="killed")]}, tmp_path / "none") == []


def test_a_directory_it_cannot_write_to(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plots need matplotlib (pip install 'scorer[bench]')")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ResultFileError, match=r"/file/out: cannot write latency.png: "):
        write_plots(synthetic_result(), tmp_path / "file" / "out")


def test_without_matplotlib_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(PlotsUnavailable, match=r"pip install 'scorer\[bench\]'$"):
        write_plots(synthetic_result(), tmp_path)
    assert list(tmp_path.iterdir()) == []
