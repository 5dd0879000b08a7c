"""scorer.service.eventloop: ``scorer run --event-loop`` (uvloop where installed, else asyncio's loop)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys

import pytest
import uvloop
from test_service_app import make_service, serving

from scorer.cli import EXIT_INPUT, main
from scorer.errors import InputError
from scorer.service import eventloop
from scorer.service.eventloop import listening_socket

pytestmark = pytest.mark.event_loops


def test_auto_is_uvloop_where_it_is_installed_and_asyncio_is_the_standard_loop() -> None:
    assert eventloop.DEFAULT_EVENT_LOOP == "auto"
    for choice in ("auto", "uvloop"):
        loop = eventloop.choose(choice)()
        assert isinstance(loop, uvloop.Loop) and eventloop.describe(loop) == f"uvloop {uvloop.__version__}"
        loop.close()
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


@pytest.mark.parametrize(("address", "family"), [("127.0.0.1", socket.AF_INET), ("::1", socket.AF_INET6)])
def test_an_ip_address_is_listened_on_from_a_socket_made_as_asyncio_makes_it(address, family) -> None:
    sock = listening_socket(address, 0)
    assert sock is not None
    with sock:
        assert sock.family == family and sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR)
        if family == socket.AF_INET6:
            assert sock.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY)
        assert sock.getsockname()[0] == address
        sock.listen(1)
        with pytest.raises(OSError):  # (that port taken: the service's ListenError says so)
            listening_socket(address, sock.getsockname()[1]).close()


def test_on_uvloop_a_server_on_an_ip_address_or_a_host_name_listens_where_asked() -> None:
    async def serve_on(host: str) -> tuple[str, int]:
        server = await asyncio.get_running_loop().create_server(asyncio.Protocol, host, 0, backlog=8)
        async with server:
            return server.sockets[0].getsockname()[:2]

    for host, address in (("127.0.0.1", "127.0.0.1"), ("::1", "::1"), ("localhost", None)):
        listened, port = eventloop.run(serve_on(host), eventloop.choose("uvloop"))  # type: ignore[arg-type]
        assert port > 0
        assert listened == address if address is not None else listened in ("127.0.0.1", "::1")


# Run in a process of its own: libuv's thread pool, once another test has started it, stays for the session.
_THREADS_SCRIPT = """
import asyncio, os, socket, sys
from test_service_app import make_service, serving
from scorer.service import eventloop

async def main():
    service, _, _ = make_service(pods=1)
    before = len(os.listdir("/proc/self/task"))
    async with serving(service) as port:  # (listening on 127.0.0.1)
        with socket.socket() as sock:  # (connected as aiohttp's connector connects: sock_connect)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        during = len(os.listdir("/proc/self/task"))
    print(before, during)
    return 0

sys.exit(eventloop.run(main(), eventloop.choose(sys.argv[1])))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc (Linux)")
@pytest.mark.parametrize("choice", ["uvloop", "asyncio"])
def test_serving_on_an_ip_address_and_looking_one_up_start_no_thread_on_either_loop(choice) -> None:
    """uvloop looks up an address given to ``create_server`` or ``sock_connect`` on libuv's thread pool (4
    threads that stay): the service binds its socket itself, and its loop answers an IP address in place
    (without those, 4 more threads on uvloop)."""
    tests = os.path.dirname(os.path.abspath(__file__))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _THREADS_SCRIPT, choice], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    before, during = map(int, done.stdout.split())
    assert during == before


def test_on_uvloop_an_ip_address_is_looked_up_in_place_and_a_host_name_as_uvloop_does() -> None:
    async def lookups() -> None:
        loop = asyncio.get_running_loop()
        for host in ("127.0.0.1", "::1"):
            found = await loop.getaddrinfo(host, 443)
            assert found and {entry[4][:2] for entry in found} == {(host, 443)}
        assert (await loop.getaddrinfo("localhost", 443, type=socket.SOCK_STREAM))[0][4][1] == 443

    eventloop.run(lookups(), eventloop.choose("uvloop"))
