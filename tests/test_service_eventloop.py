"""scorer.service.eventloop: ``scorer run --event-loop`` (uvloop where installed, else asyncio's loop)."""

from __future__ import annotations

import asyncio
import logging
import sys

import pytest
import uvloop
from test_service_app import make_service, serving

from scorer.cli import EXIT_INPUT, main
from scorer.errors import InputError
from scorer.service import eventloop

pytestmark = pytest.mark.event_loops


def test_auto_is_uvloop_where_it_is_installed_and_asyncio_is_the_standard_loop() -> None:
    assert eventloop.DEFAULT_EVENT_LOOP == "auto"
    assert eventloop.choose("auto") is uvloop.new_event_loop
    assert eventloop.choose("uvloop") is uvloop.new_event_loop
    assert eventloop.choose("asyncio") is asyncio.new_event_loop


def test_without_uvloop_auto_falls_back_and_uvloop_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # (import uvloop raises ImportError)
    assert eventloop.choose("auto") is asyncio.new_event_loop
    with pytest.raises(InputError, match=r"^--event-loop uvloop: uvloop cannot be imported \(.*\): install it"):
        eventloop.choose("uvloop")
    with pytest.raises(InputError, match=r"^--event-loop: expected one of auto, uvloop, asyncio, got 'tokio'"):
        eventloop.choose("tokio")


@pytest.mark.parametrize("choice", ["uvloop", "asyncio"])
def test_run_runs_the_coroutine_on_the_chosen_loop_and_returns_its_result(choice) -> None:
    async def main_coroutine() -> int:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, uvloop.Loop) is (choice == "uvloop")
        assert eventloop.describe(loop) == ("asyncio" if choice == "asyncio" else f"uvloop {uvloop.__version__}")
        return 7

    assert eventloop.run(main_coroutine(), eventloop.choose(choice)) == 7


def test_the_command_refuses_an_event_loop_it_cannot_run_on_before_anything_else(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)
    # (the config does not exist: the loop is checked first, so that is not what the error names)
    assert main(["run", "--config", "/nonexistent/config.yaml", "--event-loop", "uvloop"]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert "--event-loop uvloop: uvloop cannot be imported" in err and "Traceback" not in err
    # (not one of argparse's choices)
    assert main(["run", "--config", "/nonexistent/config.yaml", "--event-loop", "tokio"]) == EXIT_INPUT
    assert "argument --event-loop: invalid choice: 'tokio'" in capsys.readouterr().err


async def test_the_service_names_its_event_loop_when_it_starts_serving(caplog) -> None:
    service, _, _ = make_service(pods=1)
    with caplog.at_level(logging.INFO, logger="scorer.service"):
        async with serving(service):
            pass
    serving_lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("serving /metrics")]
    expected = "uvloop" if isinstance(asyncio.get_running_loop(), uvloop.Loop) else "asyncio"
    assert len(serving_lines) == 1
    assert serving_lines[0].endswith(f"(event loop: {eventloop.describe(asyncio.get_running_loop())})")
    assert f"(event loop: {expected}" in serving_lines[0]
