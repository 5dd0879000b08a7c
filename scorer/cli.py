"""The ``scorer`` command: simulate, explain, run, bench, config validate, plugins, plugin new.

Exit status (also in ``scorer --help`` and the README): 0 success (an
unschedulable pod is a result, not a failure); 1 internal error (a bug: a
one-line message names the exception type; ``SCORER_DEBUG=1`` prints the
traceback), or the output could not be written (standard output closed, disk
full); 2 invalid input, configuration or usage (a one-line message per error
naming the file and field, including a plugin that cannot start with its
configuration); 130 interrupted; 141 the reader of standard output went away
(``scorer simulate | head -1``), as a shell reports a process killed by
SIGPIPE.

Every user-controlled string printed for humans (tables, warnings, errors) goes
through :func:`escape`, so a name holding a newline or a terminal escape
sequence cannot forge lines or drive the terminal. JSON output is exact JSON.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

import attrs
import orjson
import yaml

from scorer import __version__, startup
from scorer.bench import options as bench_options
from scorer.config import describe_resolved, effective_config, load_and_resolve
from scorer.errors import DEBUG_ENV, ConfigError, InputError, PluginError, ScorerError, debug_enabled
from scorer.explain import explain_pod, format_table, is_manifest_ref, pod_from_manifest
from scorer.inputs.describe import printable
from scorer.kube.early import EarlyLists
from scorer.registry import ENTRY_POINT_GROUP, EXTENSION_POINTS, LoadFailure, PluginRegistry, build_registry
from scorer.scaffold import KINDS, new_plugin, plugin_names
from scorer.service import eventloop, logs
from scorer.service.build import build_service
from scorer.service.options import DEFAULT_PORT, ServiceOptions
from scorer.service.run import serve
from scorer.simulate import demo_config, load_cluster, simulate
from scorer.sources import MetricsSnapshot, load_snapshot

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_PIPE = 141

METRICS_HELP = ("MetricsSnapshot file (YAML/JSON) that metric-driven plugins read instead of Prometheus; "
                "default: MetricsSnapshot documents in the cluster file, else each plugin's Prometheus address")
EPILOG = f"""\
exit status:
  0    success (an unschedulable pod is a result, not a failure)
  1    internal error (a bug: please report it; {DEBUG_ENV}=1 prints the traceback),
       or the output could not be written (standard output closed, disk full)
  2    invalid input, configuration or usage; one line per error, naming the file and field
  130  interrupted
  141  the reader of standard output went away (scorer simulate | head -1)
"""

# C0 and C1 controls, DEL, and the invisible format characters that reorder or hide text (soft hyphen,
# Arabic letter mark, zero-width and bidi marks, embeddings, overrides and isolates, line and paragraph
# separators, word joiners, BOM, interlinear annotations, tag characters), and lone surrogates.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb"
    "\ud800-\udfff\U000e0000-\U000e007f]"
)


def escape(text: str) -> str:
    """``text`` safe for a terminal, on one line: controls and invisible format characters as
    ``\\n``, ``\\t``, ``\\x1b``, ``\\u202e`` (Python's repr spelling, as ``printable`` writes them).
    Backslashes are kept as they are, so messages that already quote a value with ``repr`` are not
    escaped twice."""
    return _UNSAFE.sub(lambda match: printable(match.group()), text)


def escape_all(value: Any) -> Any:
    """A copy of a JSON-like value with every string (keys included) escaped."""
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, dict):
        return {escape_all(k): escape_all(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [escape_all(v) for v in value]
    return value


class _OutputError(Exception):
    """Writing standard output failed (``__cause__`` is the OSError)."""


def _out(text: str = "") -> None:
    """One line (or several) on standard output."""
    try:
        sys.stdout.write(text + "\n")
    except OSError as exc:
        raise _OutputError() from exc


def _err(line: str) -> None:
    """One line on standard error; best effort (it may be closed too)."""
    stream = sys.stderr
    if stream is None:
        return
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def _error_lines(exc: ScorerError) -> list[str]:
    """``error: ...`` lines: one per error of a ConfigError (which lists them all), else one."""
    errors = getattr(exc, "errors", None)
    if isinstance(errors, list) and errors and all(isinstance(e, tuple) and len(e) == 2 for e in errors):
        source = getattr(exc, "source", "")
        prefix = f"{source}: " if source else ""
        return [f"error: {escape(f'{prefix}{path}: {msg}' if path else f'{prefix}{msg}')}" for path, msg in errors]
    if isinstance(exc, ConfigError):
        return [f"error: {escape(line)}" for line in str(exc).split("\n")]
    return [f"error: {escape(str(exc))}"]


def _registry(args: argparse.Namespace) -> PluginRegistry:
    registry = build_registry(autoload=False if args.no_plugin_autoload else None,
                              blocked=args.block_plugin or ())
    for failure in registry.failures:
        _err(escape(f"warning: {_failure_warning(failure)}"))
    return registry


def _failure_warning(failure: LoadFailure) -> str:
    return (f"{failure.describe()}; scorer runs without its plugins "
            f"(--block-plugin {failure.entry_point} stops loading it)")


def _warn(warnings: Sequence[str]) -> None:
    skipped = [w for w in warnings if "not implemented by scorer yet" in w]
    for w in warnings:
        if w not in skipped:
            _err(f"warning: {escape(w)}")
    if skipped:
        names = [m.group(1) for w in skipped if (m := re.search(r'"([^"]+)"', w))]
        _err(escape(f"note: {len(skipped)} default plugin(s) not implemented by scorer yet, skipped: "
                    f"{', '.join(names)}"))


def _config_or_demo(args: argparse.Namespace, registry: PluginRegistry) -> Any:
    """``--config``; for the built-in demo cluster with no config, the demo's metric-driven profile."""
    if args.config is not None or args.cluster is not None:
        return args.config
    config, note = demo_config(registry)
    if note:
        _err(f"note: {escape(note)}")
    return config


def _snapshot(args: argparse.Namespace) -> MetricsSnapshot | None:
    return load_snapshot(args.metrics) if args.metrics else None


def _json(data: Any, indent: bool = False) -> None:
    _out(orjson.dumps(data, option=orjson.OPT_INDENT_2 if indent else None).decode())


def _table(rows: Iterable[Sequence[str]], right: Sequence[int] = ()) -> None:
    """Columns two spaces apart; the last column is not padded; ``right``: right-aligned columns."""
    rows = [[escape(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.rjust(w) if i in right else cell.ljust(w)
                 for i, (cell, w) in enumerate(zip(row, widths, strict=False))]
        _out("  ".join([*cells, row[-1]]).rstrip())


def cmd_simulate(args: argparse.Namespace) -> int:
    objects = load_cluster(args.cluster)
    registry = _registry(args)
    report = simulate(objects, _config_or_demo(args, registry), registry=registry, seed=args.seed,
                      metrics_snapshot=_snapshot(args))
    _warn(report.warnings)
    if args.output == "json":
        _json({
            "placements": [
                {"pod": p.pod, "profile": p.profile, "node": p.node, "score": p.score,
                 "decidedBy": p.decided_by, "attempts": p.attempts, "message": p.message,
                 **({"volumes": dict(p.volumes)} if p.volumes else {})}
                for p in report.placements
            ],
            "summary": {"nodes": report.nodes, "pods": len(report.placements), "placed": report.placed,
                        "unschedulable": report.unschedulable, "errors": report.errors,
                        "ignored": report.ignored, "podsPerSecond": round(report.pods_per_second, 1)},
        }, indent=True)
        return EXIT_OK
    rows = [("POD", "NODE", "SCORE", "WHY")]
    for p in report.placements:
        why = p.decided_by if p.node else p.message
        if p.volumes:
            why += "; volumes: " + ", ".join(f"{claim}->{volume or '(unbound)'}" for claim, volume in p.volumes)
        rows.append((p.pod, p.node or "-", "" if p.score is None else str(p.score), why))
    _table(rows, right=(2,))
    _out()
    _out(f"placed {report.placed}/{len(report.placements)} pods on {report.nodes} nodes; "
         f"unschedulable {report.unschedulable}; errors {report.errors}; "
         f"{report.pods_per_second:,.0f} pods/s (scheduling cycles only)")
    if report.ignored:
        _out(f"ignored {len(report.ignored)} pending pod(s) of other schedulers: "
             f"{escape(', '.join(report.ignored))}")
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    objects = load_cluster(args.cluster)
    pod = pod_from_manifest(args.pod) if is_manifest_ref(args.pod) else args.pod
    registry = _registry(args)
    explanation = explain_pod(objects, _config_or_demo(args, registry), pod, registry=registry,
                              seed=args.seed, metrics_snapshot=_snapshot(args))
    _warn(objects.warnings)
    if args.output == "json":
        _json(explanation)
    else:
        _out(format_table(escape_all(explanation)))
    return EXIT_OK


def cmd_config_validate(args: argparse.Namespace) -> int:
    catalog = _registry(args).catalog()
    config, resolved = load_and_resolve(args.file, catalog)
    # safe_dump escapes what is not printable (allow_unicode is off): the YAML stays exact.
    _out(yaml.safe_dump(effective_config(config, resolved), sort_keys=False).rstrip())
    _out("---")
    # The text is several lines: escape the user's strings before they are laid out.
    shown = [attrs.evolve(p, scheduler_name=escape(p.scheduler_name), warnings=tuple(map(escape, p.warnings)))
             for p in resolved]
    _out(describe_resolved(shown, [escape(w) for w in config.warnings]).rstrip())
    _warn(config.warnings)  # also on stderr, as every command reports them
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    """The scheduler service: until SIGTERM/SIGINT (0), a lost lease or a fatal failure (1)."""
    if not 0 <= args.port <= 65535:
        raise InputError(f"--port: expected a port number from 0 to 65535, got {args.port}")
    options = ServiceOptions(
        config=args.config, kubeconfig=args.kubeconfig, context=args.context, bind_address=args.bind_address,
        port=args.port, tls_cert_file=args.tls_cert_file, tls_private_key_file=args.tls_private_key_file,
        log_format=args.log_format, enable_debug_endpoints=args.enable_debug_endpoints,
        autoload=False if args.no_plugin_autoload else None, blocked=tuple(args.block_plugin or ()),
        seed=args.seed, extender_profile=args.extender_profile, extender_prefix=args.extender_prefix,
        no_scheduling=args.no_scheduling, metrics_file=args.metrics, early_lists=args.early_lists)
    loop_factory = eventloop.choose(args.event_loop)
    logs.configure(options.log_format)
    service = build_service(options)
    startup.mark("built")
    for warning in (*map(_failure_warning, service.asm.registry.failures), *service.asm.warnings):
        logging.getLogger("scorer.service").warning("%s", warning)
    return eventloop.run(serve(service), loop_factory)


def cmd_bench(args: argparse.Namespace) -> int:
    """The capacity-planning bench (``scorer.bench.command``): table and summary on stdout, progress on stderr.
    The bench is loaded here, not with this module: no other command pays its import."""
    from scorer.bench import command as bench

    def out(text: str) -> None:
        for line in text.split("\n"):
            _out(escape(line))

    return bench.run_bench(bench_options.options_from_args(args), out, lambda line: _err(escape(line)))


def cmd_plugins(args: argparse.Namespace) -> int:
    """The registered plugins, then the distributions that failed to load: with the reason and the
    entry-point name ``--block-plugin`` takes, so a broken install is diagnosed from this command alone.
    JSON: ``{"plugins": [...], "failedDistributions": [...]}``, the same fields as the tables."""
    registry = _registry(args)
    listed = [(name, info.source, info.version, [p for p in EXTENSION_POINTS if p in info.extension_points])
              for name, info in sorted(registry.plugins.items())]
    if args.output == "json":
        _json({"plugins": [{"name": name, "distribution": distribution, "version": version, "extensionPoints": points}
                           for name, distribution, version, points in listed],
               "failedDistributions": [{"distribution": f.distribution, "version": f.version,
                                        "entryPoint": f.entry_point, "plugins": list(f.plugins), "error": f.error}
                                       for f in registry.failures]}, indent=True)
        return EXIT_OK
    _table([("NAME", "DISTRIBUTION", "VERSION", "EXTENSION POINTS"),
            *((name, distribution, version, ", ".join(points)) for name, distribution, version, points in listed)])
    if registry.failures:
        _out()
        _out(f"{len(registry.failures)} distribution(s) failed to load; scorer runs without their plugins:")
        _table([("DISTRIBUTION", "VERSION", "TO SKIP IT", "PLUGINS", "ERROR"),
                *((f.distribution, f.version, f"--block-plugin {f.entry_point}", ", ".join(f.plugins) or "-",
                   f.error) for f in registry.failures)])
    return EXIT_OK


def cmd_plugin_new(args: argparse.Namespace) -> int:
    """A plugin distribution in DIR/NAME, from the template of its kind (``scorer.scaffold``)."""
    names = plugin_names(args.name)
    registry = build_registry()  # what scorer and the installed distributions register: NAME must not clash
    entry_points = {ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    files = new_plugin(args.name, args.kind, args.dir, taken_plugins=registry.plugins,
                       taken_entry_points=entry_points)
    target = os.path.join(args.dir, args.name)
    _out(escape(f"created {target}: the {args.kind} plugin {names.plugin} (distribution {names.distribution}, "
                f"package {names.package}, entry point {names.entry_point})"))
    for path in files:
        _out(f"  {escape(str(path))}")
    _out("next:")
    for step in (f"pip install -e '{target}[test]'", f"pytest {target}/tests", "scorer plugins",
                 f"scorer config validate {target}/scheduler-config.yaml",
                 f"scorer simulate --config {target}/scheduler-config.yaml"):
        _out(f"  {escape(step)}")
    return EXIT_OK


class _Parser(argparse.ArgumentParser):
    """Usage errors on one line, like every other error (exit 2)."""

    def error(self, message: str) -> NoReturn:
        _err(f"error: {escape(message)} (see '{self.prog} --help')")
        raise SystemExit(EXIT_INPUT)


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--no-plugin-autoload", action="store_true",
                        help="do not load plugins from installed distributions (entry point group 'scorer')")
    common.add_argument("--block-plugin", action="append", metavar="ENTRY_POINT",
                        help="do not load this entry point (repeatable)")

    parser = _Parser(prog="scorer", description="A Kubernetes scheduler in Python.", epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"scorer {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("simulate", parents=[common], help="schedule the pending pods of a cluster file in memory")
    p.add_argument("--cluster", help="Nodes, Pods, Namespaces (YAML/JSON, multi-document or a List); "
                                     "default: the built-in demo cluster")
    p.add_argument("--config", help="KubeSchedulerConfiguration file (default: kube-scheduler's defaults)")
    p.add_argument("--output", choices=("table", "json"), default="table")
    p.add_argument("--seed", type=int, default=0, help="random seed for tie breaks (default 0)")
    p.add_argument("--metrics", metavar="FILE", help=METRICS_HELP)
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("explain", parents=[common], help="why a pod goes where it goes")
    p.add_argument("--config", help="KubeSchedulerConfiguration file (default: kube-scheduler's defaults)")
    p.add_argument("--cluster", help="cluster file (default: the built-in demo cluster)")
    p.add_argument("--pod", required=True, metavar="NS/NAME|FILE",
                   help="a pod of the cluster file, namespace/name (or name in 'default'), explained as if "
                        "pending; or a Pod manifest FILE (an existing path, or a name ending .yaml/.yml/.json) "
                        "that is not in the cluster: where it would go if applied now, spec.nodeName and all "
                        "kept as written; a cluster pod of the same namespace/name is replaced by it, as "
                        "applying the manifest would")
    p.add_argument("--output", choices=("table", "json"), default="table")
    p.add_argument("--seed", type=int, default=0, help="random seed for tie breaks (default 0)")
    p.add_argument("--metrics", metavar="FILE", help=METRICS_HELP)
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("run", parents=[common], help="the scheduler: watch a cluster, bind its pods, serve /metrics")
    p.add_argument("--config", required=True, help="KubeSchedulerConfiguration file")
    p.add_argument("--kubeconfig", help="kubeconfig file (overrides clientConnection.kubeconfig; default: the "
                                        "in-cluster service account, else $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: its current-context)")
    p.add_argument("--bind-address", default="0.0.0.0", help="address of the HTTP endpoints (default 0.0.0.0)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"port of /metrics, /healthz, /livez, /readyz (default {DEFAULT_PORT})")
    p.add_argument("--tls-cert-file", help="serve HTTPS with this certificate (PEM; with --tls-private-key-file)")
    p.add_argument("--tls-private-key-file", help="the certificate's private key (PEM)")
    p.add_argument("--log-format", choices=logs.FORMATS, default="text", help="one line per event (default text)")
    p.add_argument("--seed", type=int, help="random seed for tie breaks (default: a random one; set it to "
                                            "reproduce a run with scorer simulate)")
    p.add_argument("--enable-debug-endpoints", action="store_true",
                   help="also serve /configz and /debug/queue (the queue's pods), and /debug/extender (the "
                        "extender's last decisions): internals, off by default")
    p.add_argument("--extender-profile", metavar="NAME",
                   help="also serve kube-scheduler's extender calls (POST <prefix>/filter, <prefix>/prioritize) "
                        "with the Filter and Score plugins of this profile")
    p.add_argument("--extender-prefix", default="/scheduler", metavar="PATH",
                   help="URL path of the extender verbs (default /scheduler: kube-scheduler's urlPrefix is "
                        "http://HOST:PORT/scheduler)")
    p.add_argument("--no-scheduling", action="store_true",
                   help="with --extender-profile: serve only the extender, /metrics and the probes; bind "
                        "nothing, no leader election")
    p.add_argument("--metrics", metavar="FILE", help="MetricsSnapshot file (YAML/JSON) that metric-driven plugins "
                                                     "read instead of Prometheus (demos, tests)")
    p.add_argument("--event-loop", choices=eventloop.EVENT_LOOPS, default=eventloop.DEFAULT_EVENT_LOOP,
                   help="the event loop: uvloop (libuv's, less CPU per pod), asyncio (the standard library's), or "
                        "auto: uvloop where it is installed (default auto)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("bench", help="the capacity-planning bench: pods/s, cycle latency and memory as the cluster "
                                     "grows, in process or end to end, side by side with kube-scheduler")
    bench_options.add_arguments(p)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("config", help="configuration tools")
    config_sub = p.add_subparsers(dest="config_command", required=True, metavar="SUBCOMMAND")
    v = config_sub.add_parser("validate", parents=[common],
                              help="print the effective configuration, or the errors with their field paths")
    v.add_argument("file")
    v.set_defaults(func=cmd_config_validate)

    p = sub.add_parser("plugins", parents=[common],
                       help="list installed plugins, and the distributions that failed to load")
    p.add_argument("--output", choices=("table", "json"), default="table")
    p.set_defaults(func=cmd_plugins)

    p = sub.add_parser("plugin", help="plugin authoring tools")
    plugin_sub = p.add_subparsers(dest="plugin_command", required=True, metavar="SUBCOMMAND")
    n = plugin_sub.add_parser("new", help="write a plugin distribution that works as written: pyproject with "
                                          "the entry point, the plugin, its tests, a config, a README")
    n.add_argument("name", metavar="NAME", help="lowercase words joined by hyphens (prefer-fast-net): the "
                                                "distribution scorer-NAME, the plugin PreferFastNet")
    n.add_argument("--kind", choices=KINDS, default="score",
                   help="score: prefer nodes with a label value; filter: keep pods off nodes with a label value; "
                        "metric: score nodes by a Prometheus metric (default: score)")
    n.add_argument("--dir", default=".", help="where to create NAME/ (default: the current directory)")
    n.set_defaults(func=cmd_plugin_new)
    return parser


def main(argv: Sequence[str] | None = None, *, early_lists: EarlyLists | None = None) -> int:
    """Run one command; returns the exit status (see the module docstring). ``early_lists``: the first lists
    of ``scorer run``, asked for while the modules loaded (``scorer.kube.early``; the scorer command)."""
    if sys.stdout is None:  # started with standard output closed (scorer simulate >&-)
        _err("error: cannot write the output: standard output is closed")
        return EXIT_INTERNAL
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:  # a terminal or pipe in a non-UTF-8 locale: never fail on a character
        try:
            reconfigure(errors="backslashreplace")
        except (OSError, ValueError):
            pass
    try:
        code = _dispatch(build_parser(), argv, early_lists)
        _flush_stdout()
    except _OutputError as exc:
        return _output_failed(exc.__cause__)
    return code


def _dispatch(parser: argparse.ArgumentParser, argv: Sequence[str] | None, early_lists: EarlyLists | None) -> int:
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors (2): argparse printed them
        _flush_stdout()
        return EXIT_OK if exc.code is None else exc.code if isinstance(exc.code, int) else EXIT_INPUT
    args.early_lists = early_lists
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return int(func(args))
    except (InputError, PluginError) as exc:  # PluginError: a plugin that cannot start with its configuration
        for line in _error_lines(exc):
            _err(line)
        return EXIT_INPUT
    except ScorerError as exc:
        for line in _error_lines(exc):
            _err(line)
        return EXIT_INTERNAL
    except _OutputError:
        raise
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:
        if debug_enabled():
            _err(traceback.format_exc().rstrip())
        _err(f"internal error: {type(exc).__name__}: {escape(str(exc))[:500]} "
             f"(a bug in scorer or one of its plugins; please report it with the command that caused it; "
             f"{DEBUG_ENV}=1 prints the traceback)")
        return EXIT_INTERNAL


def _flush_stdout() -> None:
    try:
        sys.stdout.flush()
    except OSError as exc:
        raise _OutputError() from exc


def _output_failed(cause: BaseException | None) -> int:
    """Standard output cannot take more: the rest goes to /dev/null, so Python's flush at exit is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    if isinstance(cause, BrokenPipeError):  # the reader is gone: nobody to tell, as with SIGPIPE
        return EXIT_PIPE
    _err(f"error: cannot write the output: {escape(str(cause))}")
    return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
