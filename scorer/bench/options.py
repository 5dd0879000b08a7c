"""The command line of ``scorer bench``: its options on an argparse parser (``add_arguments``), read into
``BenchOptions`` (``options_from_args``). Kept apart from ``scorer.bench.command`` so that every other
command's parser (``scorer run``'s first of all) is built without loading the bench's other modules (15 of
them, with what they alone import): ``scorer.cli`` imports the command only to run it.
"""

from __future__ import annotations

from typing import Any

import attrs

from scorer.errors import InputError

DEFAULT_NODES = (100, 500, 1000, 5000, 15000, 50000)
DEFAULT_PODS = 1000
DEFAULT_OUT = "bench-results"
E2E_MAX_NODES = 5000  # the end-to-end sweep's default ceiling (a control plane on this machine)
KUBE_SCHEDULER_VERSION = "v1.20.2"
MAX_NODES = 1_000_000  # the most nodes of a point (--nodes, a workload's nodes)
MAX_REPEAT = 20
DEFAULT_TIMEOUT = 1800.0  # seconds a point may take


@attrs.frozen(slots=True)
class BenchOptions:
    """The command line of ``scorer bench`` (``None``: not given)."""

    workloads: str | None = None
    nodes: list[int] | None = None
    pods: int | None = None
    config: str | None = None
    cluster: str | None = None
    scale: int | None = None
    e2e: bool = False
    out: str = DEFAULT_OUT
    compare: str | None = None
    seed: int = 0
    only: list[str] | None = None
    percentages: list[int] | None = None
    timeout: float = DEFAULT_TIMEOUT
    repeat: int = 1
    qps: float = 5000.0
    burst: int = 5000


def add_arguments(parser: Any) -> None:
    """The options of ``scorer bench`` on an argparse parser (``parse_list`` checks the lists)."""
    parser.add_argument("--workloads", metavar="FILE",
                        help="workloads file (default: the shipped one, bench/workloads.yaml in the repository)")
    parser.add_argument("--only", metavar="NAMES", help="comma-separated workload names to run (default: all)")
    parser.add_argument("--nodes", metavar="LIST",
                        help="comma-separated node counts, for every workload (default: each workload's own, "
                             f"else {','.join(map(str, DEFAULT_NODES))})")
    parser.add_argument("--pods", type=int, metavar="N",
                        help=f"pods to schedule per point (default {DEFAULT_PODS}, fewer where a workload caps "
                             "them; with --cluster: the file's pending pods, topped up with copies of its pods)")
    parser.add_argument("--percentages", metavar="LIST",
                        help="comma-separated percentageOfNodesToScore values, 0 = adaptive (default: each "
                             "workload's own; with --cluster, the configuration's)")
    parser.add_argument("--config", metavar="FILE",
                        help="KubeSchedulerConfiguration: the profile of every workload whose profile is "
                             "'default', or of --cluster")
    parser.add_argument("--cluster", metavar="FILE",
                        help="your cluster: kubectl get nodes,pods,namespaces,replicasets,services,"
                             "poddisruptionbudgets -A -o yaml")
    parser.add_argument("--scale", type=int, metavar="N", help="with --cluster: N copies of its nodes and pods")
    parser.add_argument("--e2e", action="store_true",
                        help="also run the workloads marked e2e end to end against a real kube-apiserver, with "
                             f"scorer and kube-scheduler {KUBE_SCHEDULER_VERSION}, and those marked extender with "
                             "kube-scheduler alone, with a stand-in extender that does no work and with scorer as its "
                             "extender (up to "
                             f"{E2E_MAX_NODES:,} nodes unless --nodes is given)")
    parser.add_argument("--out", metavar="DIR", default=DEFAULT_OUT,
                        help=f"where result.json and the PNG plots go (default ./{DEFAULT_OUT})")
    parser.add_argument("--compare", metavar="BASELINE.json",
                        help="a result.json of an earlier run: mark the changes beyond the run-to-run noise")
    parser.add_argument("--seed", type=int, default=0, metavar="N",
                        help="random seed (tie breaks, metrics snapshot; default 0)")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help=f"run each in-process point N times (1..{MAX_REPEAT}), each in its own process, and "
                             "keep the run with the median cycle p50; run each end-to-end point N times, in rounds "
                             "that run every scheduler of a workload and node count in turn, and keep the run with "
                             "the median pods/s; every run's figures are under the point's 'repeats' (default 1)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"seconds a point may take before it is reported as failed (default {DEFAULT_TIMEOUT:g})")


def options_from_args(args: Any) -> BenchOptions:
    """BenchOptions from parsed arguments; ``InputError`` for a list or number that is not valid."""
    nodes = parse_list("--nodes", args.nodes, 1, MAX_NODES)
    percentages = parse_list("--percentages", args.percentages, 0, 100)
    only = [name.strip() for name in args.only.split(",") if name.strip()] if args.only is not None else None
    if only is not None and not only:
        raise InputError("--only: expected comma-separated workload names, got nothing")
    return BenchOptions(workloads=args.workloads, nodes=nodes, pods=args.pods, config=args.config,
                        cluster=args.cluster, scale=args.scale, e2e=args.e2e, out=args.out, compare=args.compare,
                        seed=args.seed, only=only, percentages=percentages, timeout=args.timeout,
                        repeat=args.repeat)


def parse_list(option: str, text: str | None, least: int, most: int) -> list[int] | None:
    """``"100,500,1000"`` -> [100, 500, 1000] (thousands separators ``_`` allowed); None when not given."""
    if text is None:
        return None
    values = []
    for item in (part.strip() for part in text.split(",")):
        try:
            value = int(item)
        except ValueError:
            raise InputError(f"{option}: expected comma-separated whole numbers, got {item!r}") from None
        if not least <= value <= most:
            raise InputError(f"{option}: {value} is out of range {least}..{most:,}")
        values.append(value)
    if not values:
        raise InputError(f"{option}: expected at least one number")
    return values
