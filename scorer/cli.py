"""The ``scorer`` command: simulate, explain, config validate, plugins."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import orjson

from scorer import __version__
from scorer.errors import ConfigError, InputError, ScorerError

EXIT_INPUT = 2
METRICS_HELP = ("MetricsSnapshot file (YAML/JSON) that metric-driven plugins read instead of Prometheus; "
                "default: MetricsSnapshot documents in the cluster file, else each plugin's Prometheus address")


def _registry(args: argparse.Namespace) -> Any:
    from scorer.registry import build_registry

    registry = build_registry(autoload=False if args.no_plugin_autoload else None,
                              blocked=args.block_plugin or ())
    for failure in registry.failures:
        print(f"warning: plugin entry point {failure.entry_point!r} of {failure.distribution} "
              f"{failure.version} failed to load: {failure.error}", file=sys.stderr)
    return registry


def _warn(warnings: Sequence[str]) -> None:
    skipped = [w for w in warnings if "not implemented by scorer yet" in w]
    for w in warnings:
        if w not in skipped:
            print(f"warning: {w}", file=sys.stderr)
    if skipped:
        import re

        names = [m.group(1) for w in skipped if (m := re.search(r'"([^"]+)"', w))]
        print(f"note: {len(skipped)} default plugin(s) not implemented by scorer yet, skipped: "
              f"{', '.join(names)}", file=sys.stderr)


def _config_or_demo(args: argparse.Namespace, registry: Any) -> Any:
    """``--config``; for the built-in demo cluster with no config, the demo's metric-driven profile."""
    if args.config is not None or args.cluster is not None:
        return args.config
    from scorer.simulate import demo_config

    config, note = demo_config(registry)
    if note:
        print(f"note: {note}", file=sys.stderr)
    return config


def _snapshot(args: argparse.Namespace) -> Any:
    if not args.metrics:
        return None
    from scorer.sources import load_snapshot

    return load_snapshot(args.metrics)


def cmd_simulate(args: argparse.Namespace) -> int:
    from scorer.simulate import load_cluster, simulate

    objects = load_cluster(args.cluster)
    registry = _registry(args)
    report = simulate(objects, _config_or_demo(args, registry), registry=registry, seed=args.seed,
                      metrics_snapshot=_snapshot(args))
    _warn(report.warnings)
    if args.output == "json":
        out = {
            "placements": [
                {"pod": p.pod, "profile": p.profile, "node": p.node, "score": p.score,
                 "decidedBy": p.decided_by, "attempts": p.attempts, "message": p.message}
                for p in report.placements
            ],
            "summary": {"nodes": report.nodes, "pods": len(report.placements), "placed": report.placed,
                        "unschedulable": report.unschedulable, "errors": report.errors,
                        "ignored": report.ignored, "podsPerSecond": round(report.pods_per_second, 1)},
        }
        sys.stdout.write(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    rows = [("POD", "NODE", "SCORE", "WHY")]
    for p in report.placements:
        why = p.decided_by if p.node else p.message
        rows.append((p.pod, p.node or "-", "" if p.score is None else str(p.score), why))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print(f"{r[0].ljust(widths[0])}  {r[1].ljust(widths[1])}  {r[2].rjust(widths[2])}  {r[3]}".rstrip())
    print()
    print(f"placed {report.placed}/{len(report.placements)} pods on {report.nodes} nodes; "
          f"unschedulable {report.unschedulable}; errors {report.errors}; "
          f"{report.pods_per_second:,.0f} pods/s (scheduling cycles only)")
    if report.ignored:
        print(f"ignored {len(report.ignored)} pending pod(s) of other schedulers: {', '.join(report.ignored)}")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from scorer.explain import explain_pod, format_table
    from scorer.simulate import load_cluster

    objects = load_cluster(args.cluster)
    registry = _registry(args)
    explanation = explain_pod(objects, _config_or_demo(args, registry), args.pod, registry=registry,
                              seed=args.seed, metrics_snapshot=_snapshot(args))
    if args.output == "json":
        sys.stdout.write(orjson.dumps(explanation).decode() + "\n")
    else:
        print(format_table(explanation))
    return 0


def cmd_config_validate(args: argparse.Namespace) -> int:
    import yaml

    from scorer.config import describe_resolved, effective_config, load_config, resolve_config

    catalog = _registry(args).catalog()
    config = load_config(args.file, catalog)
    resolved = resolve_config(config, catalog)
    print(yaml.safe_dump(effective_config(config, resolved), sort_keys=False).rstrip())
    print("---")
    print(describe_resolved(resolved, config.warnings).rstrip())
    return 0


def cmd_plugins(args: argparse.Namespace) -> int:
    registry = _registry(args)
    rows = [("NAME", "DISTRIBUTION", "VERSION", "EXTENSION POINTS")]
    from scorer.registry import EXTENSION_POINTS

    for name in sorted(registry.plugins):
        info = registry.plugins[name]
        points = [p for p in EXTENSION_POINTS if p in info.extension_points]
        rows.append((name, info.source, info.version, ", ".join(points)))
    if args.output == "json":
        data = [dict(zip(("name", "distribution", "version", "extensionPoints"),
                         (r[0], r[1], r[2], r[3].split(", ")), strict=True)) for r in rows[1:]]
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3])
    for failure in registry.failures:
        print(f"(failed) {failure.entry_point}  {failure.distribution}  {failure.version}  {failure.error}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--no-plugin-autoload", action="store_true",
                        help="do not load plugins from installed distributions (entry point group 'scorer')")
    common.add_argument("--block-plugin", action="append", metavar="ENTRY_POINT",
                        help="do not load this entry point (repeatable)")

    parser = argparse.ArgumentParser(prog="scorer", description="A Kubernetes scheduler in Python.")
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
    p.add_argument("--pod", required=True, help="namespace/name (or name in 'default')")
    p.add_argument("--output", choices=("table", "json"), default="table")
    p.add_argument("--seed", type=int, default=0, help="random seed for tie breaks (default 0)")
    p.add_argument("--metrics", metavar="FILE", help=METRICS_HELP)
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("config", help="configuration tools")
    config_sub = p.add_subparsers(dest="config_command", required=True, metavar="SUBCOMMAND")
    v = config_sub.add_parser("validate", parents=[common],
                              help="print the effective configuration, or the errors with their field paths")
    v.add_argument("file")
    v.set_defaults(func=cmd_config_validate)

    p = sub.add_parser("plugins", parents=[common], help="list installed plugins")
    p.add_argument("--output", choices=("table", "json"), default="table")
    p.set_defaults(func=cmd_plugins)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as exc:
        if args.command == "explain":
            print(f"error: {'; '.join(str(exc).splitlines())}", file=sys.stderr)
        else:
            print(f"error: invalid configuration\n{exc}", file=sys.stderr)
        return EXIT_INPUT if args.command == "explain" else 1
    except InputError as exc:
        print(f"error: {' '.join(str(exc).splitlines())}", file=sys.stderr)
        return EXIT_INPUT
    except ScorerError as exc:
        print(f"error: {' '.join(str(exc).splitlines())}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
