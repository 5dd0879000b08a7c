"""What some plugins add to the scheduling cycle, measured in one process (paired blocks).

On a shared VM two processes run minutes apart can differ by 40% (the host's load changes), so the
difference of two bench points' p50 is mostly noise when it is a fraction of a millisecond. This
module schedules one workload's pods in one process and alternates blocks of ``--block`` cycles with
every plugin of the profile and without the ``--plugins`` (the cycle skips their Filter and Score); the
machine's speed changes over minutes, not over a block, so the difference of the two medians is the
plugins' cost. Pods are placed in both kinds of block (in-flight load, memo refreshes and all).

    python -m scorer.bench.overhead      # the metrics workload, 5,000 nodes, LoadAware + NetworkTraffic
    python -m scorer.bench.overhead --nodes 15000 --pods 3000 --repeat 3

Prints, per repeat, the median cycle (ms) with and without the plugins and the difference, then the
median of the differences. Needs the contrib plugins installed (``pip install -e contrib_plugins/...``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

import numpy as np

from scorer.bench import runner
from scorer.bench.clusters import build_setup
from scorer.bench.spec import PointSpec
from scorer.bench.workloads import Workload, load_workloads
from scorer.framework import CycleState


def one_run(workload: Workload, nodes: int, pods: int, plugins: set[str], block: int,
            seed: int) -> tuple[float, float]:
    """The median cycle (ms) with every plugin and without ``plugins``, from one run of ``workload``
    whose attempts alternate blocks of ``block`` cycles of each kind."""
    setup = build_setup(workload, nodes, pods, seed)
    spec = PointSpec(workload.name, nodes, pods)
    loaded = runner.load(setup, spec, config_path=workload.config_file(), profile=workload.profile, seed=seed)
    fwk = next(iter(loaded.asm.frameworks.values()))
    missing = plugins - set(fwk.plugins)
    if missing:
        sys.exit(f"plugin(s) not in the profile: {', '.join(sorted(missing))}")
    algorithm = loaded.asm.scheduler.algorithm
    schedule_pod = algorithm.schedule_pod
    modes: list[int] = []

    def alternating(framework: Any, state: CycleState, pod: Any, **kwargs: Any) -> Any:
        mode = (len(modes) // block) % 2
        if mode:  # the cycle skips their Filter and Score (and NormalizeScore), as after a PreFilter Skip
            state.skip_filter_plugins.update(plugins)
            state.skip_score_plugins.update(plugins)
        modes.append(mode)
        return schedule_pod(framework, state, pod, **kwargs)

    algorithm.schedule_pod = alternating  # type: ignore[method-assign,assignment]
    run = runner.drive(loaded)
    cycles = np.array(run.cycles) * 1e3
    kinds = np.array(modes[: len(cycles)])  # one schedule_pod per attempt, in order
    return float(np.median(cycles[kinds == 0])), float(np.median(cycles[kinds == 1]))


def main(argv: list[str] | None = None) -> int:
    """``python -m scorer.bench.overhead``: ``--repeat`` runs, one line each, then their median."""
    parser = argparse.ArgumentParser(prog="python -m scorer.bench.overhead",
                                     description="What some plugins add to the scheduling cycle, measured in "
                                                 "one process (paired blocks).")
    parser.add_argument("--workload", default="metrics", help="a workload of --workloads (default: metrics)")
    parser.add_argument("--workloads", default=None, help="the workloads file (default: the shipped one)")
    parser.add_argument("--plugins", default="LoadAware,NetworkTraffic", help="comma-separated plugin names")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--block", type=int, default=100, help="cycles per block (default 100)")
    parser.add_argument("--repeat", type=int, default=1, help="runs, each in this process (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    found = [w for w in load_workloads(args.workloads) if w.name == args.workload]
    if not found:
        sys.exit(f"no workload {args.workload!r}")
    plugins = {name.strip() for name in args.plugins.split(",") if name.strip()}
    added = []
    for i in range(args.repeat):
        full, without = one_run(found[0], args.nodes, args.pods, plugins, args.block, args.seed)
        added.append(full - without)
        print(f"run {i + 1}: cycle p50 {full:.3f} ms with {', '.join(sorted(plugins))}, {without:.3f} ms without: "
              f"+{full - without:.3f} ms", flush=True)
    if args.repeat > 1:
        print(f"median added: {statistics.median(added):.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
