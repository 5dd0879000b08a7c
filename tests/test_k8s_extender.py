"""k8s/extender/: scorer as a kube-scheduler extender. The manifests, and kube-scheduler's configuration files.

The fast tests read the manifests (``kubekit.render_kustomization``, compared with ``kubectl kustomize`` when
kubectl is installed). They check that the objects agree with each other (labels, ports, names, the
ConfigMap's profile and the Deployment's arguments), that scorer's configuration loads with scorer's own
loader and has only the two metric-driven plugins, that the RBAC is read-only, and that both
kube-scheduler files have the extenders block and point at the Service. The ``kube`` tests submit every
object to kube-apiserver 1.20.2 as a server-side dry run, and ask the API server's RBAC authorizer what the
extender's service account may do. With kube-scheduler v1.20.2 (``scripts/build-kube.sh`` builds it):
kube-scheduler reads the v1beta1 file (strict decoding, defaulting and validation), and, with that file's
extenders block, it runs against the session's control plane. It calls a stand-in extender on 127.0.0.1
(node names only), places a pod by its answers, and keeps scheduling once the extender is gone
(``ignorable``).
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from kubekit import (
    K8S_DIR,
    Resources,
    dropped_fields,
    find_object,
    free_port,
    kube_scheduler_binary,
    render_kustomization,
    scorer_container,
)
from servicekit import Cluster, node_manifest, pod_manifest, wait_until

from scorer.bench.controlplane import end_process
from scorer.cli import main as scorer_main
from scorer.config.load import load_and_resolve
from scorer.quantity import parse_quantity
from scorer.registry import build_registry

EXTENDER_DIR = K8S_DIR / "extender"
KUBE_SCHEDULER_CONFIGS = {
    "kubescheduler.config.k8s.io/v1beta1": EXTENDER_DIR / "kube-scheduler-config.v1beta1.yaml",
    "kubescheduler.config.k8s.io/v1": EXTENDER_DIR / "kube-scheduler-config.v1.yaml",
}
PROFILE = "scorer-extender"
CONFIG_PATH = "/etc/scorer/config.yaml"
PORT = 10259
NAMESPACE = "scorer-system"
# What scorer watches in extender mode: the ClusterRole grants list and watch of these only, the calls it makes.
WATCHED = {("", "pods"), ("", "nodes"), ("", "namespaces"), ("", "services"), ("", "replicationcontrollers"),
           ("apps", "replicasets"), ("apps", "statefulsets"), ("policy", "poddisruptionbudgets")}
READ_VERBS = ("list", "watch")
WAIT = 60.0  # seconds for each step against kube-scheduler: the machine is shared and busy


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return render_kustomization(EXTENDER_DIR)


@pytest.fixture(scope="module")
def deployment(objects) -> dict[str, Any]:
    return find_object(objects, "Deployment", "scorer-extender")


@pytest.fixture(scope="module")
def container(deployment) -> dict[str, Any]:
    return scorer_container(deployment)


@pytest.fixture(scope="module")
def scorer_config(objects) -> dict[str, Any]:
    return yaml.safe_load(find_object(objects, "ConfigMap", "scorer-extender-config")["data"]["config.yaml"])


@pytest.fixture(scope="module")
def kube_scheduler_configs() -> dict[str, dict[str, Any]]:
    return {version: yaml.safe_load(path.read_text()) for version, path in KUBE_SCHEDULER_CONFIGS.items()}


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def flag(args: list[str], name: str) -> str:
    """The value after ``name`` in ``args``."""
    return args[args.index(name) + 1]


# --- the files, and the kustomization as kubectl renders it ---


def test_every_manifest_parses_and_names_its_namespace(objects) -> None:
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == sorted(["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap",
                            "Deployment", "Service", "NetworkPolicy"])
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
    for obj in objects:
        where = f"{obj['kind']} {obj['metadata'].get('name')}"
        assert obj["apiVersion"] and obj["metadata"]["name"], where
        assert obj["metadata"].get("namespace") == (None if obj["kind"] in cluster_scoped else NAMESPACE), where
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["name"].startswith("scorer-extender"), where  # apart from k8s/'s objects


def test_every_file_is_in_the_kustomization_or_is_a_kube_scheduler_config() -> None:
    kustomization = yaml.safe_load((EXTENDER_DIR / "kustomization.yaml").read_text())
    shipped = {str(p.relative_to(EXTENDER_DIR)) for p in EXTENDER_DIR.rglob("*") if p.is_file()}
    not_objects = {"kustomization.yaml", "README.md", *(p.name for p in KUBE_SCHEDULER_CONFIGS.values())}
    assert shipped - set(kustomization["resources"]) == not_objects


def test_kubectl_kustomize_renders_the_same_objects(objects) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: render_kustomization is then not compared with kustomize's own")
    result = subprocess.run([kubectl, "kustomize", str(EXTENDER_DIR)], capture_output=True, text=True,
                            timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr

    def keyed(docs):
        return {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in docs}

    assert keyed(doc for doc in yaml.safe_load_all(result.stdout) if doc) == keyed(objects)


def test_the_namespace_is_the_one_k8s_creates(objects) -> None:
    """kustomize loads no file from outside the directory: a copy, which must not drift."""
    assert find_object(objects, "Namespace") == yaml.safe_load((K8S_DIR / "namespace.yaml").read_text())


# --- scorer's configuration and the Deployment that runs it ---


def test_the_configuration_loads_with_scorers_loader_and_has_only_the_metric_plugins(scorer_config,
                                                                                      tmp_path) -> None:
    registry = build_registry()  # with the entry points: the contrib plugins the image installs
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(scorer_config))
    config, profiles = load_and_resolve(path, registry.catalog())
    assert [p.scheduler_name for p in profiles] == [PROFILE]
    [profile] = profiles
    assert profile.points["filter"] == profile.points["score"] == ("LoadAware", "NetworkTraffic")
    assert profile.weights == {"LoadAware": 3, "NetworkTraffic": 2}
    # Only what every profile must have besides (scorer neither sorts a queue nor binds with --no-scheduling).
    assert set(profile.plugin_names) == {"LoadAware", "NetworkTraffic", "PrioritySort", "DefaultBinder"}
    assert profile.warnings == ()
    assert scorer_config["profiles"][0]["plugins"]["multiPoint"]["disabled"] == [{"name": "*"}]
    assert config.leader_election.leader_elect is False  # the replicas serve side by side
    assert not config.client_connection.kubeconfig  # in-cluster
    assert scorer_main(["config", "validate", str(path)]) == 0  # the CLI's word too


def test_the_plugin_args_are_those_of_k8s_configmap(scorer_config) -> None:
    """The same Prometheus and the same args as scorer's own deployment (k8s/configmap.yaml)."""
    k8s_configmap = yaml.safe_load((K8S_DIR / "configmap.yaml").read_text())
    k8s_config = yaml.safe_load(k8s_configmap["data"]["config.yaml"])
    [profile] = scorer_config["profiles"]
    assert profile["pluginConfig"] == k8s_config["profiles"][0]["pluginConfig"]
    assert {c["args"]["address"] for c in profile["pluginConfig"]} == {"http://prometheus-operated.monitoring.svc:9090"}


def test_the_deployment_serves_the_configmaps_profile_without_scheduling(deployment, container, objects,
                                                                         scorer_config) -> None:
    args = container["args"]
    assert args[:3] == ["run", "--config", CONFIG_PATH]  # the image's CMD, extended
    assert flag(args, "--extender-profile") == PROFILE
    assert PROFILE in {p["schedulerName"] for p in scorer_config["profiles"]}
    assert "--no-scheduling" in args
    assert flag(args, "--bind-address") == "0.0.0.0" and flag(args, "--port") == str(PORT)
    assert "--tls-cert-file" not in args and "--kubeconfig" not in args  # plain HTTP; in-cluster
    mount = next(m for m in container["volumeMounts"] if CONFIG_PATH.startswith(m["mountPath"] + "/"))
    assert mount["readOnly"] is True
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    configmap = find_object(objects, "ConfigMap", volume["configMap"]["name"])
    assert configmap["metadata"]["name"] == "scorer-extender-config"
    assert CONFIG_PATH.removeprefix(mount["mountPath"] + "/") in configmap["data"]


def test_the_deployment_runs_two_unprivileged_replicas_of_k8s_image(deployment, container, objects) -> None:
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    assert selects(spec["selector"]["matchLabels"], spec["template"]["metadata"]["labels"])
    pod = spec["template"]["spec"]
    account = find_object(objects, "ServiceAccount")
    assert pod["serviceAccountName"] == account["metadata"]["name"] == "scorer-extender"
    assert pod["automountServiceAccountToken"] is True and account["automountServiceAccountToken"] is True
    k8s_deployment = yaml.safe_load((K8S_DIR / "deployment.yaml").read_text())
    k8s_container = k8s_deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == k8s_container["image"]
    assert pod["securityContext"] == k8s_deployment["spec"]["template"]["spec"]["securityContext"]
    assert container["securityContext"] == k8s_container["securityContext"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert not any(pod.get(key) for key in ("hostNetwork", "hostPID", "hostIPC"))
    for resource in ("cpu", "memory"):
        request, limit = (parse_quantity(container["resources"][kind][resource]) for kind in ("requests", "limits"))
        assert 0 < request <= limit, resource


def test_the_deployment_probes_livez_and_readyz_on_its_port(container) -> None:
    assert container["ports"] == [{"name": "http", "containerPort": PORT, "protocol": "TCP"}]
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        check = container[probe]["httpGet"]
        assert (check["path"], check["port"], check["scheme"]) == (path, PORT, "HTTP"), probe


# --- Service, NetworkPolicy, RBAC ---


def test_the_service_exposes_the_pods_port(deployment, container, objects) -> None:
    service = find_object(objects, "Service")
    assert service["metadata"]["name"] == "scorer-extender"
    assert selects(service["spec"]["selector"], deployment["spec"]["template"]["metadata"]["labels"])
    [port] = service["spec"]["ports"]
    assert port["port"] == PORT and port["protocol"] == "TCP"
    assert port["targetPort"] in {p["name"] for p in container["ports"]}


def test_k8s_and_k8s_extender_select_only_their_own_pods(deployment, objects) -> None:
    """Both can be deployed in scorer-system: neither's Service, NetworkPolicy nor Deployment takes the other's
    pods (the ServiceMonitor of k8s/ scrapes only k8s/'s Service)."""
    k8s = render_kustomization()
    scheduler_labels = find_object(k8s, "Deployment", "scorer")["spec"]["template"]["metadata"]["labels"]
    extender_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert not selects(find_object(k8s, "Service")["spec"]["selector"], extender_labels)
    assert not selects(find_object(k8s, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"], extender_labels)
    assert not selects(find_object(k8s, "Deployment", "scorer")["spec"]["selector"]["matchLabels"], extender_labels)
    assert not selects(deployment["spec"]["selector"]["matchLabels"], scheduler_labels)
    extender_service = find_object(objects, "Service")
    monitor = find_object(k8s, "ServiceMonitor")["spec"]
    assert not selects(monitor["selector"]["matchLabels"], extender_service["metadata"]["labels"])


def test_the_networkpolicy_admits_the_port_from_kube_scheduler_and_prometheus(deployment, objects) -> None:
    policy = find_object(objects, "NetworkPolicy")["spec"]
    assert selects(policy["podSelector"]["matchLabels"], deployment["spec"]["template"]["metadata"]["labels"])
    assert policy["policyTypes"] == ["Ingress"]
    assert all(rule["ports"] == [{"protocol": "TCP", "port": PORT}] for rule in policy["ingress"])
    peers = [rule.get("from") for rule in policy["ingress"]]
    # kube-scheduler (host network, or outside the cluster's network): any address, so no "from".
    assert None in peers
    # The metrics scrape, as in k8s/: Prometheus pods *in* the monitoring namespace.
    assert [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
             "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}] in peers
    assert len(peers) == 2


def test_the_clusterrole_only_reads_what_scorer_watches(objects) -> None:
    role = find_object(objects, "ClusterRole")
    granted = set()
    for rule in role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule  # no resourceNames, no nonResourceURLs
        assert sorted(rule["verbs"]) == sorted(READ_VERBS), rule
        granted |= {(group, resource) for group in rule["apiGroups"] for resource in rule["resources"]}
    assert granted == WATCHED  # no wildcard, no subresource, nothing else
    assert not [o for o in objects if o["kind"] in ("Role", "RoleBinding")]  # no Lease: no leader election
    binding = find_object(objects, "ClusterRoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}
    account = find_object(objects, "ServiceAccount")["metadata"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["name"],
                                    "namespace": account["namespace"]}]


# --- kube-scheduler's configuration ---


@pytest.mark.parametrize("version", list(KUBE_SCHEDULER_CONFIGS))
def test_the_kube_scheduler_config_calls_scorers_service(version, kube_scheduler_configs, objects,
                                                         container) -> None:
    config = kube_scheduler_configs[version]
    assert (config["apiVersion"], config["kind"]) == (version, "KubeSchedulerConfiguration")
    [extender] = config["extenders"]
    service = find_object(objects, "Service")
    url = urlsplit(extender["urlPrefix"])
    assert url.scheme == "http" and extender["enableHTTPS"] is False  # scorer serves plain HTTP
    assert url.hostname == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    assert url.port == service["spec"]["ports"][0]["port"] == PORT
    assert url.path == flag(container["args"], "--extender-prefix") == "/scheduler"
    assert (extender["filterVerb"], extender["prioritizeVerb"]) == ("filter", "prioritize")
    assert extender["nodeCacheCapable"] is True and extender["ignorable"] is True
    assert extender["httpTimeout"] == "5s"
    assert isinstance(extender["weight"], int) and extender["weight"] > 0
    assert not {"bindVerb", "preemptVerb", "managedResources"} & set(extender)  # kube-scheduler binds, every pod
    # kube-scheduler's own default profile and its usual leader election.
    assert config["profiles"] == [{"schedulerName": "default-scheduler"}]
    assert config["leaderElection"] == {"leaderElect": True, "resourceNamespace": "kube-system",
                                        "resourceName": "kube-scheduler"}


def test_both_kube_scheduler_configs_say_the_same(kube_scheduler_configs) -> None:
    v1beta1, v1 = (dict(config) for config in kube_scheduler_configs.values())
    assert v1beta1.pop("apiVersion") != v1.pop("apiVersion")
    assert v1beta1 == v1


@pytest.mark.parametrize("version", list(KUBE_SCHEDULER_CONFIGS))
def test_scorers_loader_reads_the_kube_scheduler_config(version, catalog) -> None:
    """scorer's loader decodes both versions strictly, with kube-scheduler's validation of extenders: the v1 file
    has no newer kube-scheduler to read it here."""
    config, profiles = load_and_resolve(KUBE_SCHEDULER_CONFIGS[version], catalog)
    [extender] = config.extenders
    assert extender.node_cache_capable and extender.ignorable
    assert extender.http_timeout.total_seconds() == 5
    assert [p.scheduler_name for p in profiles] == ["default-scheduler"]


# --- kube-scheduler v1.20.2 reads and runs the v1beta1 file ---




def write_kubeconfig(path: Path, server: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "test", "user": {"token": "unused"}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}]}))
    return path


def write_config_to(binary: str, config: dict[str, Any], workdir: Path) -> tuple[int, str, Path]:
    """kube-scheduler's --write-config-to: decode, default and validate ``config``, write it out, exit."""
    source, written = workdir / "config.yaml", workdir / "written.yaml"
    source.write_text(yaml.safe_dump(config))
    result = subprocess.run([binary, f"--config={source}", "--secure-port=0", f"--write-config-to={written}"],
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return result.returncode, result.stdout + result.stderr, written


@pytest.mark.slow
def test_kube_scheduler_reads_the_v1beta1_file(kube_scheduler_configs, tmp_path) -> None:
    """No API server needed: kube-scheduler connects to nothing before it writes the configuration out."""
    binary = kube_scheduler_binary()
    shipped = kube_scheduler_configs["kubescheduler.config.k8s.io/v1beta1"]
    config = copy.deepcopy(shipped)  # the shipped file, with a kubeconfig that exists (for nothing listening)
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{free_port()}")
    config["clientConnection"]["kubeconfig"] = str(kubeconfig)
    code, output, written = write_config_to(binary, config, tmp_path)
    assert code == 0, output[-3000:]
    effective = yaml.safe_load(written.read_text())
    [extender] = effective["extenders"]
    [expected] = shipped["extenders"]
    # What kube-scheduler 1.20 will use; it leaves out false booleans (enableHTTPS).
    assert {key: extender.get(key, False) for key in expected} == expected and set(extender) <= set(expected)
    assert [p["schedulerName"] for p in effective["profiles"]] == ["default-scheduler"]
    assert effective["leaderElection"]["leaderElect"] is True
    assert effective["leaderElection"]["resourceLock"] == "leases"
    # The decoding is strict: a misspelt field is refused, not ignored.
    config["extenders"][0]["nodeCacheCapible"] = True
    code, output, _ = write_config_to(binary, config, tmp_path)
    assert code != 0 and "unknown field" in output and "nodeCacheCapible" in output, output[-3000:]


class StandInExtender:
    """kube-scheduler's extender calls answered on 127.0.0.1, every one recorded as (path, content type, body).

    filter passes every node but ``reject``; prioritize gives ``favourite`` 10 and the others 0.
    """

    def __init__(self, reject: str, favourite: str) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        calls, lock = self.calls, threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
                with lock:
                    calls.append((self.path, self.headers.get("Content-Type", ""), body))
                names = list(body.get("NodeNames") or [])
                if self.path.endswith("/filter"):
                    answer: Any = {"NodeNames": [n for n in names if n != reject],
                                   "FailedNodes": {n: "the stand-in says no" for n in names if n == reject},
                                   "Error": ""}
                else:
                    answer = [{"Host": n, "Score": 10 if n == favourite else 0} for n in names]
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, name="stand-in-extender", daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving and close the port: a call is then refused. Closing again does nothing."""
        if not self.thread.is_alive():
            return
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def healthz(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return response.status == 200 and response.read() == b"ok"
    except (OSError, urllib.error.URLError):
        return False


@pytest.mark.kube
@pytest.mark.slow
def test_kube_scheduler_calls_the_extender_and_goes_on_without_it(control_plane, kube_scheduler_configs,
                                                                 tmp_path) -> None:
    """kube-scheduler v1.20.2 with the v1beta1 file's extenders block (only urlPrefix points elsewhere) against
    the session's control plane. Its profile has a name only this test's pods use, and the pods select this
    test's three nodes, so no other test's pods or nodes are touched."""
    binary = kube_scheduler_binary()
    scheduler_name, namespace, label = "extender-check", "extender-check", "scorer.test/extender-check"
    nodes = [f"extender-check-{suffix}" for suffix in ("a", "b", "c")]
    rejected, favourite = nodes[0], nodes[2]
    cluster = Cluster(control_plane)

    def pod(name: str) -> dict[str, Any]:
        return pod_manifest(name, scheduler=scheduler_name, namespace=namespace,
                            spec={"nodeSelector": {label: "true"}})

    def bound(name: str) -> str | None:
        return cluster.bound(namespace).get(name)

    shipped = kube_scheduler_configs["kubescheduler.config.k8s.io/v1beta1"]
    extender = StandInExtender(reject=rejected, favourite=favourite)
    health_port = free_port()
    config = {**copy.deepcopy(shipped),
              "clientConnection": {"kubeconfig": str(control_plane.kubeconfig)},
              "leaderElection": {"leaderElect": False},
              "profiles": [{"schedulerName": scheduler_name}],
              "healthzBindAddress": f"127.0.0.1:{health_port}", "metricsBindAddress": f"127.0.0.1:{health_port}"}
    config["extenders"][0]["urlPrefix"] = f"http://127.0.0.1:{extender.port}/scheduler"
    assert {k: v for k, v in config["extenders"][0].items() if k != "urlPrefix"} == {
        k: v for k, v in shipped["extenders"][0].items() if k != "urlPrefix"}
    (tmp_path / "kube-scheduler.yaml").write_text(yaml.safe_dump(config))
    log_path = tmp_path / "kube-scheduler.log"
    scheduler = None
    try:
        cluster.ensure_namespace(namespace)
        for name in nodes:  # left over by an interrupted run?
            cluster.call("DELETE", f"/api/v1/nodes/{name}", ok=(200, 404))
        cluster.create_all([node_manifest(name, labels={label: "true"}) for name in nodes])
        with open(log_path, "wb") as log:
            scheduler = subprocess.Popen([binary, f"--config={tmp_path / 'kube-scheduler.yaml'}", "--secure-port=0",
                                          "-v=2"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

        def log_tail() -> str:
            return log_path.read_text(errors="replace")[-3000:]

        def healthy() -> bool:
            assert scheduler.poll() is None, f"kube-scheduler exited with {scheduler.returncode}: {log_tail()}"
            return healthz(health_port)

        wait_until(healthy, WAIT, "kube-scheduler's /healthz")
        started = time.monotonic()

        # With the extender: filter drops `rejected`, prioritize favours `favourite` (+500 over identical nodes).
        cluster.create_all([pod("with-extender")])
        assert wait_until(lambda: bound("with-extender"), WAIT, "the pod bound") == favourite, log_tail()
        paths = [path for path, _, _ in extender.calls]
        assert paths[:2] == ["/scheduler/filter", "/scheduler/prioritize"], paths
        for path, content_type, body in extender.calls:
            assert content_type == "application/json", path
            assert body["Pod"]["metadata"]["name"] == "with-extender", path
            assert body.get("Nodes") is None, path  # nodeCacheCapable: names only, no Node objects
        assert sorted(extender.calls[0][2]["NodeNames"]) == nodes  # the nodes kube-scheduler's filters passed
        assert sorted(extender.calls[1][2]["NodeNames"]) == sorted(set(nodes) - {rejected})

        # Without it (ignorable): the call is refused, kube-scheduler schedules on its own plugins.
        extender.close()
        calls = len(extender.calls)
        cluster.create_all([pod("without-extender")])
        assert wait_until(lambda: bound("without-extender"), WAIT, "the pod bound without the extender") in nodes
        assert len(extender.calls) == calls
        assert "as it returned error" in log_tail() and "has ignorable flag set" in log_tail()  # 1.20's words

        time.sleep(max(0.0, 3.0 - (time.monotonic() - started)))  # up for a few seconds at least
        assert healthy(), log_tail()
    finally:
        if scheduler is not None:
            end_process(scheduler)
        extender.close()
        cluster.delete_pods(namespace)
        for name in nodes:
            cluster.call("DELETE", f"/api/v1/nodes/{name}", ok=(200, 404))


# --- a real API server's word: dry run, RBAC ---


@pytest.mark.kube
def test_every_manifest_passes_a_server_side_dry_run(control_plane, objects) -> None:
    resources = Resources(control_plane)
    status, _ = resources.apply(find_object(objects, "Namespace"))  # for real: the namespaced dry runs need it
    assert status in (200, 201)
    checked = []
    for obj in objects:
        if obj["kind"] == "Namespace":
            continue
        where = f"{obj['kind']} {obj['metadata']['name']}"
        status, returned = resources.apply(obj, dry_run=True)
        assert status in (200, 201), f"{where}: {status} {returned.get('message', returned)}"
        assert dropped_fields(obj, returned) == [], f"{where}: fields the API server does not know"
        checked.append(obj["kind"])
    assert len(checked) == len(objects) - 1
    status, _ = control_plane.request("GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/scorer-extender")
    assert status == 404  # a dry run stores nothing


@pytest.mark.kube
def test_the_service_account_may_read_and_do_nothing_else(control_plane, objects) -> None:
    """The shipped RBAC objects applied for real; the API server's authorizer answers SubjectAccessReviews for
    the extender's service account."""
    resources = Resources(control_plane)
    account = find_object(objects, "ServiceAccount")["metadata"]
    user = f"system:serviceaccount:{account['namespace']}:{account['name']}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{account['namespace']}", "system:authenticated"]
    applied = [find_object(objects, kind) for kind in ("Namespace", "ServiceAccount", "ClusterRole",
                                                       "ClusterRoleBinding")]
    for obj in applied:
        status, body = resources.apply(obj)
        assert status in (200, 201), (obj["kind"], body)

    def allowed(group: str, resource: str, verb: str, subresource: str = "") -> bool:
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                  "spec": {"user": user, "groups": groups,
                           "resourceAttributes": {"group": group, "resource": resource, "verb": verb,
                                                  "subresource": subresource, "namespace": "default"}}}
        status, body = control_plane.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                                             json.dumps(review).encode())
        assert status == 201, body
        return bool(json.loads(body)["status"].get("allowed"))

    try:
        # The binding reaches the authorizer through its informers: shortly after it is created.
        wait_until(lambda: allowed("", "pods", "watch"), 30, "the ClusterRoleBinding to take effect")
        refused = [(g, r, v) for g, r in sorted(WATCHED) for v in READ_VERBS if not allowed(g, r, v)]
        assert refused == []
        writes = ("create", "update", "patch", "delete", "deletecollection")
        granted = [(g, r, v) for g, r in sorted(WATCHED) for v in writes if allowed(g, r, v)]
        assert granted == []
        # What scorer does when it schedules (k8s/rbac.yaml), and reading anything else.
        others = (("", "pods", "create", "binding"), ("", "pods", "patch", "status"),
                  ("events.k8s.io", "events", "create", ""), ("", "events", "create", ""),
                  ("coordination.k8s.io", "leases", "get", ""), ("", "secrets", "get", ""),
                  ("", "configmaps", "list", ""))
        assert [call for call in others if allowed(*call)] == []
    finally:  # the Namespace stays: the other kube tests use it
        for obj in reversed(applied[1:]):
            path = f"{resources.collection(obj)}/{obj['metadata']['name']}"
            control_plane.request("DELETE", path)
