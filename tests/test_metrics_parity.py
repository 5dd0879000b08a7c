"""scorer's /metrics beside kube-scheduler v1.20.2's, on one control plane, as kube-scheduler's dashboards read them.

One control plane, two schedulers (kube-scheduler's ``default-scheduler`` and ``scorer run``'s own
profile, each with leader election on its own Lease), each schedules pods; then

* the families kube-scheduler has and scorer should have (``scheduler_*``, ``rest_client_*``,
  ``process_*``, ``leader_election_master_status``) are compared: name, type, label names and bucket
  bounds as printed (so ``le="1"`` in both). The differences allowed are the README's table (section
  "Running the scheduler", after the metrics list), read from the README itself: a rename, a family
  kube dropped after 1.20, buckets changed since;
* ``promtool check metrics`` finds nothing to lint in scorer's;
* a real Prometheus scrapes both, as jobs ``kube-scheduler`` and ``scorer``, and kubernetes-mixin
  style queries (the scheduler dashboard's rates, quantiles, client request rates by code, process CPU,
  leader status, and ``k8s/dashboard``'s leader join) must return series for both jobs.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubekit import REPO, kube_scheduler_binary
from prometheus_client.parser import text_string_to_metric_families
from promkit import LOCALHOST, PrometheusServer, free_port
from servicekit import Cluster, ScorerProcess, node_manifest, pod_manifest, scheduler_config, wait_until

pytestmark = [pytest.mark.kube, pytest.mark.prometheus]

NAMESPACE = "parity"
SCORER = "scorer-parity"  # scorer's schedulerName and Lease
KUBE = "default-scheduler"
PODS = 12  # per scheduler
WAIT = 60.0
COMPARED = re.compile(r"(scheduler_|rest_client_|process_|leader_election_master_status)")
JOBS = {"kube-scheduler", "scorer"}

# kubernetes-mixin style queries (its scheduler dashboard, k8s/dashboard's): each must answer for both jobs.
QUERIES = (
    "process_cpu_seconds_total",  # the mixin's $instance variable: label_values(process_cpu_seconds_total, instance)
    "sum by (job, instance) (rate(process_cpu_seconds_total[1m]))",
    "sum by (job, instance) (process_resident_memory_bytes)",
    "sum by (job, instance, result) (rate(scheduler_schedule_attempts_total[1m]))",
    "histogram_quantile(0.99, sum by (job, instance, le) "
    "(rate(scheduler_scheduling_algorithm_duration_seconds_bucket[1m])))",
    "histogram_quantile(0.99, sum by (job, instance, extension_point, le) "
    "(rate(scheduler_framework_extension_point_duration_seconds_bucket[1m])))",
    "sum by (job, instance, code) (rate(rest_client_requests_total[1m]))",
    'histogram_quantile(0.99, sum by (job, instance, verb, url, le) '
    '(rate(rest_client_request_duration_seconds_bucket{verb="POST"}[1m])))',
    'histogram_quantile(0.99, sum by (job, instance, verb, url, le) '
    '(rate(rest_client_request_duration_seconds_bucket{verb="GET"}[1m])))',
    'scheduler_pod_scheduling_attempts_bucket{le="1"}',  # Go's number text: le="1", not "1.0"
    "sum by (job, instance, name) (leader_election_master_status) == 1",
    "sum by (job, queue) (scheduler_pending_pods * on (job, instance) group_left () "
    "(max by (job, instance) (leader_election_master_status) == 1))",
)


def documented_differences() -> dict[str, str | None]:
    """kube-scheduler 1.20.2's family -> scorer's (None: none) from the README's differences table."""
    readme = (REPO / "README.md").read_text()
    header = readme.index("| kube-scheduler 1.20.2 | scorer | why |")
    differences: dict[str, str | None] = {}
    for line in readme[header:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        kube, ours = (cell.strip().strip("`") for cell in line.strip("|").split("|")[:2])
        differences[kube] = None if ours == "–" else ours
    assert differences, "the README's differences table is empty"
    return differences


def families(text: str) -> dict[str, tuple[str, set[str], tuple[str, ...]]]:
    """Family -> (type, label names, bucket bounds as printed) of the compared families of a scrape."""
    found = {}
    for family in text_string_to_metric_families(text):
        if not COMPARED.match(family.name):
            continue
        labels = {name for sample in family.samples for name in sample.labels if name != "le"}
        first = next((sample.labels for sample in family.samples if sample.name.endswith("_bucket")), None)
        bounds = tuple(sample.labels["le"] for sample in family.samples if sample.name.endswith("_bucket")
                       and {k: v for k, v in sample.labels.items() if k != "le"} ==
                       {k: v for k, v in (first or {}).items() if k != "le"})
        found[family.name] = (family.type, labels, bounds)
    return found


class TwoJobPrometheus(PrometheusServer):
    """A Prometheus that scrapes kube-scheduler and scorer as two jobs (their own job and instance labels)."""

    def __init__(self, binary: str, jobs: dict[str, str], *, data_dir: Path) -> None:
        self.jobs = jobs
        super().__init__(binary, list(jobs.values()), scrape_interval="1s", data_dir=data_dir, honor_labels=False)

    def _write_config(self) -> None:
        self.config_file.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [target]}]}
                               for job, target in self.jobs.items()]}))


@pytest.fixture(scope="module")
def scrapes(plane, prometheus_bin, tmp_path_factory) -> Iterator[tuple[str, str, TwoJobPrometheus, ScorerProcess]]:
    """(kube-scheduler's /metrics, scorer's /metrics, a Prometheus scraping both, scorer's process) after both
    bound PODS pods."""
    workdir = tmp_path_factory.mktemp("parity")
    cluster = Cluster(plane)
    cluster.ensure_namespace(NAMESPACE)
    cluster.create_all([node_manifest(f"{NAMESPACE}-{i}") for i in range(3)])
    kube_port = free_port()
    kube_config = workdir / "kube-scheduler.yaml"
    kube_config.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1beta1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(plane.kubeconfig_for("admin"))},
        "leaderElection": {"leaderElect": True},
        "healthzBindAddress": f"{LOCALHOST}:{kube_port}", "metricsBindAddress": f"{LOCALHOST}:{kube_port}"}))
    with open(workdir / "kube-scheduler.log", "wb") as log:
        kube = subprocess.Popen([kube_scheduler_binary(), f"--config={kube_config}", "--secure-port=0", "-v=1"],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    # (kube-scheduler's default lease timings, as the kube-scheduler beside it has: the tests' short ones (4 s,
    # renewed within 3 s) can lose the lease on a busy 2-core machine running both schedulers, the API server
    # and Prometheus, and a leader that loses it exits)
    config = scheduler_config(workdir / "scorer.yaml", SCORER, leader_elect=True, lease=SCORER,
                              lease_duration="15s", renew_deadline="10s", retry_period="2s")
    scorer = ScorerProcess(workdir, config, plane.kubeconfig, name="scorer-parity")
    prometheus = None
    try:
        scorer.wait_ready(WAIT)
        cluster.create_all([pod_manifest(f"{scheduler}-{i}", namespace=NAMESPACE, scheduler=scheduler)
                            for scheduler in (KUBE, SCORER) for i in range(PODS)])
        wait_until(lambda: len(cluster.bound(NAMESPACE)) == 2 * PODS, WAIT, "both schedulers' pods bound")
        wait_until(lambda: scorer.metric("scheduler_schedule_attempts_total", {"result": "scheduled"}) == PODS,
                   WAIT, "scorer's attempts counted")
        prometheus = TwoJobPrometheus(prometheus_bin, {"kube-scheduler": f"{LOCALHOST}:{kube_port}",
                                                       "scorer": f"{LOCALHOST}:{scorer.port}"},
                                      data_dir=workdir / "prometheus")
        with prometheus:
            status, scorer_text = scorer.get("/metrics")
            assert status == 200

            def kube_metrics() -> str:
                with urllib.request.urlopen(f"http://{LOCALHOST}:{kube_port}/metrics", timeout=10) as response:
                    return str(response.read().decode())

            # kube-scheduler sets its cache-size gauge from its periodic (1 s) cleanup: scraped before it, the
            # family is absent
            wait_until(lambda: "scheduler_scheduler_cache_size{" in kube_metrics(), WAIT,
                       "kube-scheduler's cache size reported")
            yield kube_metrics(), scorer_text, prometheus, scorer
    finally:
        kube.terminate()
        kube.wait(timeout=20)
        scorer.stop()
        cluster.delete_pods(NAMESPACE)


def test_every_family_kube_scheduler_has_is_scorers_or_a_documented_difference(scrapes) -> None:
    kube_text, scorer_text, _, _ = scrapes
    kube, ours = families(kube_text), families(scorer_text)
    differences = documented_differences()
    assert set(differences) <= set(kube), "the README lists a family kube-scheduler 1.20.2 does not have"
    problems = []
    for name, (kind, labels, bounds) in sorted(kube.items()):
        if name in differences and differences[name] != name:
            renamed = differences[name]
            if renamed is not None and renamed not in ours:
                problems.append(f"{name}: documented as {renamed}, which scorer does not export")
            continue
        if name not in ours:
            problems.append(f"{name}: not exported")
            continue
        our_kind, our_labels, our_bounds = ours[name]
        if our_kind != kind:
            problems.append(f"{name}: {our_kind}, kube-scheduler's is a {kind}")
        if our_labels and our_labels != labels:  # (a labelled family without samples shows no label names)
            problems.append(f"{name}: labels {sorted(our_labels)}, kube-scheduler's {sorted(labels)}")
        # (nor buckets: the plugin durations are sampled in 10% of the cycles, a run may have none;
        # tests/test_exposition.py holds their bounds to the ones kube-scheduler 1.20.2 prints)
        if our_bounds and our_bounds != bounds and name not in differences:
            problems.append(f"{name}: buckets {our_bounds}, kube-scheduler's {bounds}")
    assert problems == []
    # The documented bucket change is real (else the table is stale).
    assert ours["scheduler_preemption_victims"][2] != kube["scheduler_preemption_victims"][2]


def test_promtool_finds_nothing_to_lint_in_scorers_metrics(scrapes) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package has it)")
    _, scorer_text, _, _ = scrapes
    check = subprocess.run([promtool, "check", "metrics"], input=scorer_text, capture_output=True, text=True,
                           timeout=30)
    assert (check.returncode, check.stdout + check.stderr) == (0, "")


def test_kubernetes_mixin_style_queries_answer_for_both_jobs(scrapes) -> None:
    _, _, prometheus, scorer = scrapes
    assert not scorer.exited(), f"scorer exited with {scorer.proc.returncode}: {scorer.log()[-3000:]}"
    prometheus.wait_for_scrape(WAIT)  # (else: each target's health and last error)
    missing = []
    for query in QUERIES:
        try:
            wait_until(lambda q=query: JOBS <= {series["metric"].get("job") for series in prometheus.query(q)},
                       30, query, interval=0.5)
        except AssertionError:
            missing.append(f"{query}: {sorted({s['metric'].get('job') for s in prometheus.query(query)})}")
    assert missing == [], (f"targets: {prometheus.targets_summary()}; scorer "
                           f"{'exited' if scorer.exited() else 'runs'}: {scorer.log()[-3000:]}")
