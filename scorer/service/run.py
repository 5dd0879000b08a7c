"""Running the service: the HTTP listener, signals, the bounded shutdown, the exit status.

``serve(service)`` starts the application (its cleanup contexts start the
parts), listens on ``--bind-address``:``--port`` (HTTPS when a certificate
is given; ``listen``: with ``--extender-profile``, each connection starts
at the extender's lean front, ``scorer.extender.front``, which answers
kube-scheduler's requests itself and hands any other to aiohttp), and waits
until a stop is requested: SIGTERM or SIGINT (exit 0), or a fatal failure
(a lost lease, a crashed scheduling loop: exit 1). Then readiness fails,
the scheduling loop stops taking pods, in-flight bindings get
``binding_grace`` seconds, the lease is released, the reflectors and
sessions close, all within ``shutdown_timeout`` (15 s) in total.

What a client can hold is bounded by ``http_timeout`` (``ServiceOptions``,
15 s; ``DEFAULT_HTTP_TIMEOUT``), set on the application (``create_app``'s
``handler_args``), so every server of it behaves alike:

* a connection is closed when it has not sent a whole request head (request
  line and headers) within ``http_timeout`` of opening, or of the previous
  answer on it: so a connection that sends nothing, one that stalls or trickles
  a request line or headers, and an idle keep-alive connection are all closed
  after ``http_timeout`` (aiohttp's ``keepalive_timeout``, armed when the
  connection opens; data arriving does not postpone it);
* a body the handler reads (the extender's verbs) must arrive within
  ``http_timeout`` of the head, else 408 (``scorer.extender.http``);
* a body no handler reads (the other routes, one refused with 413) is read
  and dropped for at most ``LINGERING_TIME`` (2 s, ``scorer.service.app``)
  after the answer, then the connection is closed;
* a request line or a header line longer than 8190 bytes, or more than 128
  headers, gets 400 at once (aiohttp's limits); it is logged as one WARNING
  line, without a traceback, and repeats within 30 s as one counted line
  (``scorer.service.logs``).

The lean front keeps these bounds for the requests it answers (its module
docstring says how).

With TLS, a connection that never completes its handshake is closed by
asyncio after 60 s.

The event loop's default executor (the host-name lookups of aiohttp's
resolver, the Prometheus sources' queries) is ``WORKER_THREADS`` threads,
set before the application starts: asyncio's own default is sized by the core
count (min(32, cores + 4)).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl
from concurrent.futures import ThreadPoolExecutor

from aiohttp import web

from scorer.errors import InputError
from scorer.extender.front import FrontFactory
from scorer.service import eventloop, logs
from scorer.service.app import EXTENDER_VERBS_KEY, LINGERING_TIME, Service
from scorer.service.options import ServiceOptions

log = logging.getLogger("scorer.service")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INPUT = 2

# What runs in threads is few at a time: a host-name lookup (aiohttp shares one per host) and one query per
# Prometheus source. Enough that every source of a usual configuration fetches at once, whatever the cores.
WORKER_THREADS = 8
#: The listener's backlog of connections not yet accepted (aiohttp's sites' default).
BACKLOG = 128


class ListenError(InputError):
    """The HTTP endpoint cannot be served (address in use, bad certificate)."""


def server_ssl_context(options: ServiceOptions) -> ssl.SSLContext | None:
    if not options.tls_cert_file and not options.tls_private_key_file:
        return None
    if not (options.tls_cert_file and options.tls_private_key_file):
        raise ListenError("--tls-cert-file and --tls-private-key-file go together: give both or neither")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(options.tls_cert_file, options.tls_private_key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ListenError(f"--tls-cert-file {options.tls_cert_file} / --tls-private-key-file "
                          f"{options.tls_private_key_file}: cannot load the certificate and key: {exc}") from None
    return context


async def listen(runner: web.AppRunner, options: ServiceOptions, context: ssl.SSLContext | None
                 ) -> tuple[asyncio.Server, FrontFactory | None]:
    """Listen on ``options``' address and port for ``runner``'s application (set up): aiohttp's protocol, behind
    the extender's lean front where the application serves the extender verbs (``scorer.extender.front``).
    The listener, and the front (None: none)."""
    assert runner.server is not None
    verbs = runner.app[EXTENDER_VERBS_KEY]
    front = None if verbs is None else FrontFactory(runner.server, verbs, options.extender_prefix,
                                                    options.http_timeout, LINGERING_TIME)
    listener = await asyncio.get_running_loop().create_server(front or runner.server, options.bind_address,
                                                              options.port, ssl=context, backlog=BACKLOG)
    return listener, front


def stop_listening(listener: asyncio.Server | None, front: FrontFactory | None) -> None:
    """No new connections; the front's closed (aiohttp closes its own in the runner's cleanup)."""
    if listener is not None:
        listener.close()
    if front is not None:
        front.close_all()


async def serve(service: Service, *, on_listening: asyncio.Future[int] | None = None) -> int:
    """Run ``service`` until a stop is requested; the exit status. ``on_listening`` gets the port."""
    options = service.options
    context = server_ssl_context(options)
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=WORKER_THREADS, thread_name_prefix="scorer-worker"))
    runner = web.AppRunner(service.app(), handle_signals=False, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    listener: asyncio.Server | None = None
    front: FrontFactory | None = None
    try:
        try:
            listener, front = await listen(runner, options, context)
        except OSError as exc:
            where = f"{options.bind_address}:{options.port}"
            raise ListenError(f"cannot listen on {where}: {exc.strerror or exc}") from None
        port = int(listener.sockets[0].getsockname()[1]) if listener.sockets else options.port
        scheme = "https" if context is not None else "http"
        extender = (f", the extender ({options.extender_prefix.rstrip('/')}/filter, /prioritize; profile "
                    f"{options.extender_profile})" if options.extender_profile else "")
        log.info("serving /metrics, /healthz, /livez, /readyz%s on %s://%s:%d%s (event loop: %s)", extender, scheme,
                 options.bind_address, port, "; scheduling nothing (--no-scheduling)" if options.no_scheduling else "",
                 eventloop.describe(loop))
        if on_listening is not None and not on_listening.done():
            on_listening.set_result(port)
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, service.request_stop, 0, signal.Signals(signum).name)
        await service.stop_requested.wait()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        service.begin_shutdown()
        stop_listening(listener, front)
        try:
            async with asyncio.timeout(options.shutdown_timeout):
                await runner.cleanup()
        except TimeoutError:
            log.error("shutdown did not finish within %.0fs; exiting anyway", options.shutdown_timeout)
            service.exit_code = service.exit_code or EXIT_FAILED
    logs.flush()
    log.info("stopped (exit status %d)", service.exit_code)
    return service.exit_code

