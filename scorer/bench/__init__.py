"""The capacity-planning bench (``scorer bench``).

Where each stage lives:
- ``spec``: the contract between the stages: ``Setup`` (one cluster to schedule
  on, as API objects) and ``PointSpec`` (one measurement to make); the result
  JSON's shape is documented there.
- ``workloads``: the declarative workloads file (``workloads.yaml`` ships the
  default one; the repository's ``bench/workloads.yaml`` is the same file).
- ``clusters``: builds a ``Setup`` for a workload at a node count
  (scheduler_perf's node and pod templates, the pod shapes).
- ``snapshot``: a ``Setup`` from a user's exported cluster (``--cluster FILE
  --scale N``).
- ``runner``: one in-process point, in a fresh process (its own peak RSS).
- ``e2e`` and ``controlplane``: one point end to end against a real
  kube-apiserver, for scorer and for kube-scheduler v1.20.2 (``e2e_config``:
  the schedulers' configurations and command lines; ``e2e_api``: the objects
  as API requests, the harness's client and bind watch; ``e2e_metrics``: what
  is read of the processes and their ``/metrics``).
- ``report``, ``resultfile``, ``plots``, ``progress``: the terminal table, the JSON result, the
  log-log fits, ``--compare``, the capacity-planning summary, the PNG plots.
- ``command``: the sweep behind ``scorer bench``; ``options``: its command line (the
  parser's options and ``BenchOptions``), all that ``scorer.cli`` loads of the bench
  until the command runs.
- ``overhead``: what some plugins add to the cycle, their blocks of cycles
  alternated with the rest's in one process (``python -m scorer.bench.overhead``).
"""
