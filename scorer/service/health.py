"""``/healthz``, ``/livez``, ``/readyz`` as kube-scheduler serves them (reference §6).

Each endpoint has named checks. A check returns None when it passes, else
the reason it fails. ``GET /readyz`` answers 200 ``ok`` when every check
passes, else 503 with one line per check (``[+]ping ok``,
``[-]informer-sync failed: waiting for pods``) and ``readyz check failed``;
``?verbose`` gives the lines on success too, ending ``readyz check passed``;
``?exclude=<name>`` (repeatable) leaves a check out; ``/readyz/<name>`` runs
one check. Informational lines (``info``: each metric source's state) are
shown with ``?verbose`` but never fail the endpoint: the plugins fail open
when a source is down, and a scheduler that went unready whenever Prometheus
blinked would be worse than one that schedules on its last good data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs
from aiohttp import web

Check = Callable[[], str | None]  # None: passes; otherwise why it fails


@attrs.frozen(slots=True)
class NamedCheck:
    name: str
    check: Check


class HealthEndpoint:
    """One of ``healthz``, ``livez``, ``readyz``."""

    def __init__(self, name: str, checks: Sequence[NamedCheck],
                 info: Callable[[], Mapping[str, str]] | None = None) -> None:
        self.name = name
        self.checks = list(checks)
        self.info = info

    def evaluate(self, exclude: frozenset[str] = frozenset()) -> tuple[bool, list[str]]:
        lines, ok = [], True
        for named in self.checks:
            if named.name in exclude:
                continue
            try:
                reason = named.check()
            except Exception as exc:  # a check must not take the endpoint down
                reason = f"{type(exc).__name__}: {exc}"
            if reason is None:
                lines.append(f"[+]{named.name} ok")
            else:
                ok = False
                lines.append(f"[-]{named.name} failed: {reason}")
        return ok, lines

    async def handle(self, request: web.Request) -> web.Response:
        exclude = frozenset(request.query.getall("exclude", ()))
        ok, lines = self.evaluate(exclude)
        verbose = "verbose" in request.query
        if ok and not verbose:
            return web.Response(text="ok")
        if verbose and self.info is not None:
            lines += [f"[+]{name} {state}" for name, state in self.info().items()]
        lines.append(f"{self.name} check {'passed' if ok else 'failed'}")
        return web.Response(text="\n".join(lines) + "\n", status=200 if ok else 503)

    async def handle_one(self, request: web.Request) -> web.Response:
        name = request.match_info["check"]
        for named in self.checks:
            if named.name == name:
                reason = named.check()
                if reason is None:
                    return web.Response(text="ok")
                return web.Response(text=f"[-]{name} failed: {reason}\n", status=503)
        raise web.HTTPNotFound(text=f"no check {name!r} on /{self.name}\n")

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get(f"/{self.name}", self.handle)
        app.router.add_get(f"/{self.name}/{{check}}", self.handle_one)
