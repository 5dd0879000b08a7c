"""The phases of scorer's start (``scorer.startup``), as ``/metrics`` exports them and the bench reads them."""

from __future__ import annotations

import pytest

from scorer import exposition, startup
from scorer.bench import e2e
from scorer.metrics import SchedulerMetrics


def test_each_phase_is_kept_the_first_time_in_order_exported_and_read_back_by_the_bench(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(startup, "_reached", {})
    registry = SchedulerMetrics().collector_registry
    before = exposition.render(registry).decode()
    assert "# TYPE scorer_startup_seconds gauge" in before and "scorer_startup_seconds{" not in before
    assert e2e.startup_s(before) is None
    startup.mark("synced")  # (out of order: reached() still gives them in PHASES order)
    startup.mark("imported")
    first, synced = startup.reached()["imported"], startup.reached()["synced"]
    startup.mark("imported")  # (reached before: kept as it was)
    assert startup.reached() == {"imported": first, "synced": synced} and list(startup.reached()) == [
        "imported", "synced"]
    assert 0 < synced <= first
    with pytest.raises(ValueError, match=r"^not a start-up phase: 'ready' \(phases: imported, built, synced\)$"):
        startup.mark("ready")
    text = exposition.render(registry).decode()
    assert f'scorer_startup_seconds{{phase="imported"}} {exposition.go_float(first)}\n' in text
    assert e2e.startup_s(text) == {"imported": round(first, 3), "synced": round(synced, 3)}
