"""RepeatLog: the first failure of a kind at once, its repeats as one counted line."""

from __future__ import annotations

import logging

import pytest

from scorer.logsummary import RepeatLog


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def setup(caplog: pytest.LogCaptureFixture) -> tuple[RepeatLog, Clock, pytest.LogCaptureFixture]:
    clock = Clock()
    caplog.set_level(logging.INFO, logger="test.repeats")
    return RepeatLog(logging.getLogger("test.repeats"), interval=30.0, clock=clock), clock, caplog


def test_repeats_within_the_interval_become_one_counted_line(setup):
    repeats, clock, caplog = setup
    for i in range(1000):
        clock.now = i * 0.01
        repeats.warning("event write", "writing an event for pod p%d failed", i)
    assert [r.getMessage() for r in caplog.records] == ["writing an event for pod p0 failed"]
    clock.now = 31.0
    repeats.warning("event write", "writing an event for pod p%d failed", 1000)
    messages = [r.getMessage() for r in caplog.records]
    assert messages[1] == ("event write: 999 more like this in the last 31s "
                           "(last: writing an event for pod p999 failed)")
    assert messages[2] == "writing an event for pod p1000 failed"
    assert all(r.levelno == logging.WARNING for r in caplog.records)


def test_kinds_are_counted_apart_and_an_expired_kind_is_summarised_by_another(setup):
    repeats, clock, caplog = setup
    repeats.warning("a", "a failed")
    repeats.warning("a", "a failed again")
    repeats.error("b", "b failed")
    assert [r.getMessage() for r in caplog.records] == ["a failed", "b failed"]
    clock.now = 40.0
    repeats.error("b", "b failed later")  # b's own window expired too: a new window
    messages = [r.getMessage() for r in caplog.records]
    assert "a: 1 more like this in the last 40s (last: a failed again)" in messages
    assert messages[-1] == "b failed later"


def test_recovered_and_flush_write_what_was_counted(setup):
    repeats, clock, caplog = setup
    repeats.warning("x", "x failed")
    repeats.warning("x", "x failed")
    clock.now = 5.0
    repeats.recovered("x", "x works again")
    assert [r.getMessage() for r in caplog.records][-2:] == [
        "x: 1 more like this in the last 5s (last: x failed)", "x works again"]
    repeats.recovered("never-logged", "not written")
    assert caplog.records[-1].getMessage() == "x works again"
    repeats.warning("y", "y failed")
    repeats.warning("y", "y failed")
    repeats.flush()
    assert caplog.records[-1].getMessage() == "y: 1 more like this in the last 0s (last: y failed)"
    repeats.flush()  # nothing left: nothing written
    assert caplog.records[-1].getMessage() == "y: 1 more like this in the last 0s (last: y failed)"


def test_a_zero_interval_is_refused():
    with pytest.raises(ValueError, match="interval"):
        RepeatLog(logging.getLogger("x"), interval=0)
