"""k8s/ and the Dockerfile: what they promise, that they agree with each other, and a real API server's word.

The fast tests read the manifests (``kubekit.render_kustomization``, checked against ``kubectl kustomize``
when kubectl is installed) and check the Deployment's security, probe and resource settings, that the
objects reference each other correctly (labels, ports, names), that the ConfigMap's configuration loads
with scorer's own loader and the installed plugins, and that the Dockerfile builds and runs what the
Deployment expects. The ``kube`` tests submit every object to kube-apiserver 1.20.2 as a server-side dry
run, and the ServiceMonitor to a ServiceMonitor CRD installed for real (tests/data/servicemonitor-crd.yaml,
rebuilt from a packaged copy of the operator's schema: see tests/data/make_servicemonitor_crd.py).
"""

from __future__ import annotations

import copy
import fnmatch
import json
import re
import shutil
import subprocess
import sys
import time
import zipfile
from typing import Any

import pytest
import yaml
from kubekit import K8S_DIR, REPO, Resources, dropped_fields, find_object, render_kustomization, scorer_container

from scorer.cli import main as scorer_main
from scorer.config.load import load_and_resolve
from scorer.registry import build_registry

CONFIG_PATH = "/etc/scorer/config.yaml"
PORT = 10259
CRD_FILE = REPO / "tests/data/servicemonitor-crd.yaml"


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return render_kustomization()


@pytest.fixture(scope="module")
def deployment(objects) -> dict[str, Any]:
    return find_object(objects, "Deployment", "scorer")


@pytest.fixture(scope="module")
def container(deployment) -> dict[str, Any]:
    return scorer_container(deployment)


@pytest.fixture(scope="module")
def scheduler_config(objects) -> dict[str, Any]:
    return yaml.safe_load(find_object(objects, "ConfigMap", "scorer-config")["data"]["config.yaml"])


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


# --- every file parses; the kustomization renders as kubectl renders it ---


def test_every_manifest_parses_and_names_its_namespace(objects) -> None:
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == sorted(["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                            "ConfigMap", "ConfigMap", "Deployment", "Deployment", "Service", "NetworkPolicy",
                            "ServiceMonitor"])
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
    for obj in objects:
        where = f"{obj['kind']} {obj['metadata'].get('name')}"
        assert obj["apiVersion"] and obj["metadata"]["name"], where
        assert ("namespace" in obj["metadata"]) == (obj["kind"] not in cluster_scoped), where
    namespaces = {o["metadata"].get("namespace") for o in objects} - {None}
    assert namespaces == {"scorer-system", "default"}  # default: only the example workload
    assert [o["metadata"]["name"] for o in objects if o["metadata"].get("namespace") == "default"] == [
        "scorer-example"]


def test_every_file_of_k8s_is_part_of_the_kustomization() -> None:
    kustomization = yaml.safe_load((K8S_DIR / "kustomization.yaml").read_text())
    used = set(kustomization["resources"]) | {
        source.rpartition("=")[2] for g in kustomization["configMapGenerator"] for source in g["files"]}
    shipped = {str(p.relative_to(K8S_DIR)) for p in K8S_DIR.rglob("*")
               if p.is_file() and p.relative_to(K8S_DIR).parts[0] != "extender"}  # (its own kustomization)
    assert shipped - used == {"kustomization.yaml", "README.md"}


def test_kubectl_kustomize_renders_the_same_objects(objects) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (Debian's kubernetes-client package has one): "
                    "render_kustomization is then not compared with kustomize's own rendering")
    result = subprocess.run([kubectl, "kustomize", str(K8S_DIR)], capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    rendered = [doc for doc in yaml.safe_load_all(result.stdout) if doc]

    def keyed(docs):
        return {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in docs}

    assert keyed(rendered) == keyed(objects)


# --- the Deployment ---


def test_the_deployment_runs_two_replicas_under_its_service_account(deployment, objects) -> None:
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert selects(spec["selector"]["matchLabels"], spec["template"]["metadata"]["labels"])
    account = find_object(objects, "ServiceAccount")
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert account["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert pod["automountServiceAccountToken"] is True and account["automountServiceAccountToken"] is True
    assert pod.get("schedulerName", "default-scheduler") == "default-scheduler"  # scorer is not placed by scorer


def test_the_deployment_runs_unprivileged(deployment, container) -> None:
    pod_context = deployment["spec"]["template"]["spec"]["securityContext"]
    context = container["securityContext"]
    for where in (pod_context, context):
        assert where["runAsNonRoot"] is True
        assert isinstance(where["runAsUser"], int) and where["runAsUser"] > 0
        assert where["seccompProfile"] == {"type": "RuntimeDefault"}
    assert context["runAsUser"] == pod_context["runAsUser"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert "privileged" not in context or context["privileged"] is False
    pod = deployment["spec"]["template"]["spec"]
    assert not any(pod.get(key) for key in ("hostNetwork", "hostPID", "hostIPC"))


def test_the_deployment_probes_livez_and_readyz_on_the_metrics_port(container) -> None:
    assert container["ports"] == [{"name": "metrics", "containerPort": PORT, "protocol": "TCP"}]
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        check = container[probe]["httpGet"]
        assert (check["path"], check["port"], check["scheme"]) == (path, PORT, "HTTP"), probe
        assert container[probe]["timeoutSeconds"] >= 1 and container[probe]["failureThreshold"] >= 1
    args = container["args"]
    assert args[args.index("--port") + 1] == str(PORT)
    assert args[args.index("--bind-address") + 1] == "0.0.0.0"  # the kubelet probes the pod's IP
    assert "--tls-cert-file" not in args  # plain HTTP, as the probes' scheme says


def test_the_deployment_requests_and_limits_cpu_and_memory(container) -> None:
    from scorer.quantity import parse_quantity

    resources = container["resources"]
    for resource in ("cpu", "memory"):
        request, limit = (parse_quantity(resources[kind][resource]) for kind in ("requests", "limits"))
        assert 0 < request <= limit, resource


def test_the_deployment_reads_its_configuration_from_the_configmap(deployment, container, objects) -> None:
    args = container["args"]
    assert args[args.index("--config") + 1] == CONFIG_PATH
    assert "--kubeconfig" not in args  # in-cluster: the service account
    mount = next(m for m in container["volumeMounts"] if CONFIG_PATH.startswith(m["mountPath"] + "/"))
    assert mount["readOnly"] is True
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    configmap = find_object(objects, "ConfigMap", volume["configMap"]["name"])
    assert CONFIG_PATH.removeprefix(mount["mountPath"] + "/") in configmap["data"]
    assert configmap["metadata"]["namespace"] == deployment["metadata"]["namespace"]


# --- the configuration ---


def test_the_configuration_loads_with_scorers_loader_and_the_installed_plugins(scheduler_config, tmp_path) -> None:
    registry = build_registry()  # with the entry points: the contrib plugins the image installs
    enabled = {p["name"] for profile in scheduler_config["profiles"]
               for p in profile["plugins"]["multiPoint"]["enabled"]}
    missing = enabled - set(registry.plugins)
    assert not missing, f"install the contrib plugins {sorted(missing)} (scripts/test.sh does)"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(scheduler_config))
    config, profiles = load_and_resolve(path, registry.catalog())
    assert [p.scheduler_name for p in profiles] == ["scorer"]
    assert config.leader_election.leader_elect is True
    assert not config.client_connection.kubeconfig  # in-cluster
    metric_driven = {"LoadAware", "NetworkTraffic"}
    assert metric_driven <= enabled
    assert scorer_main(["config", "validate", str(path)]) == 0  # the CLI's word too


def test_leader_election_uses_the_lease_the_role_grants(scheduler_config, objects) -> None:
    election = scheduler_config["leaderElection"]
    role = find_object(objects, "Role")
    assert role["metadata"]["namespace"] == election["resourceNamespace"] == "scorer-system"
    lease_rules = [r for r in role["rules"] if r["resources"] == ["leases"]]
    assert {name for r in lease_rules for name in r.get("resourceNames", [])} == {election["resourceName"]}


def test_the_example_workload_asks_for_the_profile(scheduler_config, objects) -> None:
    example = find_object(objects, "Deployment", "scorer-example")
    names = {p["schedulerName"] for p in scheduler_config["profiles"]}
    assert example["spec"]["template"]["spec"]["schedulerName"] in names
    assert selects(example["spec"]["selector"]["matchLabels"], example["spec"]["template"]["metadata"]["labels"])


# --- Service, ServiceMonitor, NetworkPolicy, RBAC bindings ---


def test_the_service_exposes_the_metrics_port_of_the_pods(deployment, container, objects) -> None:
    service = find_object(objects, "Service")
    assert selects(service["spec"]["selector"], deployment["spec"]["template"]["metadata"]["labels"])
    assert service["spec"]["ports"] == [{"name": "metrics", "port": PORT, "targetPort": "metrics", "protocol": "TCP"}]
    assert {p["name"] for p in container["ports"]} >= {"metrics"}


def test_the_servicemonitor_scrapes_the_service(objects) -> None:
    service = find_object(objects, "Service")
    monitor = find_object(objects, "ServiceMonitor")["spec"]
    assert selects(monitor["selector"]["matchLabels"], service["metadata"]["labels"])
    assert service["metadata"]["namespace"] in monitor["namespaceSelector"]["matchNames"]
    assert service["metadata"]["labels"][monitor["jobLabel"]] == "scorer"  # the dashboard's default job
    [endpoint] = monitor["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert (endpoint["path"], endpoint["scheme"]) == ("/metrics", "http")


def test_the_networkpolicy_admits_only_prometheus_on_the_metrics_port(deployment, objects) -> None:
    policy = find_object(objects, "NetworkPolicy")["spec"]
    assert selects(policy["podSelector"]["matchLabels"], deployment["spec"]["template"]["metadata"]["labels"])
    assert policy["policyTypes"] == ["Ingress"]
    [rule] = policy["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": PORT}]
    # One peer with both selectors (pods matching it *in* namespaces matching it), not two peers (either).
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                             "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}]


def test_the_bindings_give_the_roles_to_the_service_account(objects) -> None:
    account = find_object(objects, "ServiceAccount")["metadata"]
    subject = {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    for binding_kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = find_object(objects, binding_kind)
        assert binding["subjects"] == [subject]
        role = find_object(objects, role_kind, binding["roleRef"]["name"])
        assert binding["roleRef"]["kind"] == role_kind
        assert binding["metadata"].get("namespace") == role["metadata"].get("namespace")


def test_the_dashboard_configmap_is_the_json_file_with_the_sidecar_label(objects) -> None:
    configmap = find_object(objects, "ConfigMap", "scorer-grafana-dashboard")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    [(key, text)] = configmap["data"].items()
    assert key.endswith(".json") and text == (K8S_DIR / "dashboard/scorer.json").read_text()
    assert json.loads(text)["uid"]


# --- the Dockerfile ---


def dockerfile_stages() -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The global ARG defaults and the stages: {"from": image, "name": alias, "instructions": [(op, rest)]}."""
    lines, current = [], ""
    for raw in (REPO / "Dockerfile").read_text().splitlines():
        if raw.lstrip().startswith("#") and not current:
            continue
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        current += raw
        if current.strip():
            lines.append(current.strip())
        current = ""
    args: dict[str, str] = {}
    stages: list[dict[str, Any]] = []
    for line in lines:
        op, _, rest = line.partition(" ")
        op = op.upper()
        if op == "FROM":
            image, _, alias = rest.partition(" AS ")
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image.strip())
            stages.append({"from": image, "name": alias.strip(), "instructions": []})
        elif op == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
        elif stages:
            stages[-1]["instructions"].append((op, rest.strip()))
    return args, stages


def exec_form(stage: dict[str, Any], op: str) -> list[str]:
    [value] = [rest for o, rest in stage["instructions"] if o == op]
    parsed = json.loads(value)
    assert isinstance(parsed, list), f"{op} in shell form: the exec form (a JSON list) gets the signals"
    return parsed


def test_the_image_is_multi_stage_on_a_slim_python(container) -> None:
    _, stages = dockerfile_stages()
    assert len(stages) >= 2
    final = stages[-1]
    assert final["from"] == "python:3.11-slim"
    assert all(stage["from"].startswith("python:3.11") for stage in stages)
    builders = {stage["name"] for stage in stages[:-1]}
    assert "builder" in builders
    final_text = " ".join(rest for _, rest in final["instructions"])
    # Nothing is compiled or fetched in the final stage: wheels from the builder, installed without an index.
    assert not re.search(r"apt-get|apk |gcc|g\+\+|build-essential|pip wheel|pip install \.", final_text)
    assert "--no-index" in final_text and "from=builder" in final_text
    # The build writes the cache of attrs' generated code once (the image writes no bytecode at run time).
    assert "PYTHONDONTWRITEBYTECODE= scorer plugins" in final_text
    assert not [rest for op, rest in final["instructions"] if op in ("COPY", "ADD") and "--from=" not in rest]


def test_the_image_runs_scorer_as_the_deployments_numeric_user(deployment, container) -> None:
    _, stages = dockerfile_stages()
    final = stages[-1]
    [user] = [rest for op, rest in final["instructions"] if op == "USER"]
    uid, _, gid = user.partition(":")
    security = deployment["spec"]["template"]["spec"]["securityContext"]
    assert uid.isdigit() and int(uid) == security["runAsUser"] != 0
    assert gid.isdigit() and int(gid) == security["runAsGroup"]
    created = " ".join(rest for op, rest in final["instructions"] if op == "RUN")
    assert f"--uid {uid}" in created and f"--gid {gid}" in created


def test_the_deployment_args_extend_the_images_command(container) -> None:
    _, stages = dockerfile_stages()
    assert exec_form(stages[-1], "ENTRYPOINT") == ["scorer"]
    command = exec_form(stages[-1], "CMD")
    assert command == ["run", "--config", CONFIG_PATH]
    assert "command" not in container  # the image's entrypoint runs
    assert container["args"][: len(command)] == command
    assert str(PORT) in " ".join(rest for op, rest in stages[-1]["instructions"] if op == "EXPOSE")


def test_the_image_and_the_deployment_give_numpy_one_thread(container) -> None:
    # The scorer command's own bound (tests/test_service_threads.py), written out where an operator reads and
    # changes it; the image sets the libraries' variables too, for Python programs other than the command.
    libraries = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    _, stages = dockerfile_stages()
    image_env = dict(item.partition("=")[::2] for op, rest in stages[-1]["instructions"] if op == "ENV"
                     for item in rest.split())
    assert {"SCORER_NUMERIC_THREADS": "1", **libraries}.items() <= image_env.items()
    deployment_env = {e["name"]: e.get("value") for e in container.get("env", [])}
    assert deployment_env.get("SCORER_NUMERIC_THREADS") == "1"


def test_the_image_installs_the_plugins_the_configuration_enables(scheduler_config) -> None:
    registry = build_registry()
    enabled = {p["name"] for profile in scheduler_config["profiles"]
               for p in profile["plugins"]["multiPoint"]["enabled"]}
    distributions = {registry.plugins[name].source for name in enabled} - {"scorer"}
    assert distributions, "a metrics-driven profile uses contrib plugins"
    _, stages = dockerfile_stages()
    final_install = " ".join(rest for op, rest in stages[-1]["instructions"] if op == "RUN")
    copied = {source.rstrip("/") for op, rest in stages[0]["instructions"] if op == "COPY"
              for source in rest.split()[:-1]}
    [wheel_command] = [rest for op, rest in stages[0]["instructions"] if op == "RUN" and "pip wheel" in rest]
    for distribution in distributions:
        directory = "contrib_plugins/" + distribution.removeprefix("scorer-")
        assert (REPO / directory / "pyproject.toml").is_file(), directory
        assert directory in copied and f"./{directory}" in wheel_command.split(), directory
        assert re.search(rf"\s{distribution}(\s|$)", final_install), distribution


def build_context() -> set[str]:
    """The files ``docker build .`` sends, with .dockerignore applied as Docker applies it.

    Docker (moby's patternmatcher) excludes a path when the last pattern that matches the path or one of
    its parent directories is not a ``!`` exception; ``*`` and ``?`` stay within a path segment, ``**``
    matches any number of segments.
    """
    patterns = []
    for line in (REPO / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = "".join("(.*/)?" if part == "**/" else ".*" if part == "**" else "[^/]*" if part == "*"
                        else "[^/]" if part == "?" else re.escape(part)
                        for part in re.split(r"(\*\*/|\*\*|\*|\?)", pattern))
        patterns.append((re.compile(regex + r"\Z"), negate))

    def excluded(path: str) -> bool:
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        result = False
        for regex, negate in patterns:
            if any(regex.match(prefix) for prefix in prefixes):
                result = not negate
        return result

    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True, timeout=60).stdout.split()
    return {f for f in files if (REPO / f).is_file() and not excluded(f)}


def test_the_build_context_holds_what_the_builder_copies_and_nothing_else() -> None:
    context = build_context()
    _, stages = dockerfile_stages()
    copies = [rest.split()[:-1] for op, rest in stages[0]["instructions"] if op == "COPY"]
    sources = [source.rstrip("/") for sources in copies for source in sources]
    for source in sources:
        assert source in context or any(f.startswith(source + "/") for f in context), f"{source} is not sent"
    tracked = subprocess.run(["git", "ls-files", "scorer"], cwd=REPO, capture_output=True, text=True, check=True,
                             timeout=60).stdout.split()
    assert set(tracked) <= context  # the package, its data files included
    for outside in context:
        assert any(outside == s or outside.startswith(s + "/") for s in sources), f"{outside} is sent but unused"
    assert not [f for f in context if "/tests/" in f or fnmatch.fnmatch(f, "*.pyc")]


@pytest.mark.slow
def test_the_builder_stage_builds_the_wheels_from_the_build_context(tmp_path) -> None:
    """The builder's ``pip wheel`` run on exactly the files the context sends (no Docker here; the build
    backend comes from the package index as in the image build)."""
    _, stages = dockerfile_stages()
    [wheel_command] = [rest for op, rest in stages[0]["instructions"] if op == "RUN" and "pip wheel" in rest]
    targets = [t for t in wheel_command.split("pip wheel", 1)[1].split() if not t.startswith("-")][1:]
    assert targets[0] == "."
    source = tmp_path / "src"
    for name in build_context():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, source / name)
    wheels = tmp_path / "wheels"
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                             "--wheel-dir", str(wheels), *targets], cwd=source, capture_output=True, text=True,
                            timeout=300, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    built = {path.name.split("-")[0]: path for path in wheels.glob("*.whl")}
    assert set(built) == {"scorer", "scorer_loadaware", "scorer_networktraffic"}
    with zipfile.ZipFile(built["scorer"]) as wheel:
        names = wheel.namelist()
        assert "scorer/data/demo-config.yaml" in names
        entry_points = wheel.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert re.search(r"^scorer = scorer\.__main__:main$", entry_points, re.M)  # the image's ENTRYPOINT
    for plugin in ("scorer_loadaware", "scorer_networktraffic"):
        with zipfile.ZipFile(built[plugin]) as wheel:
            text = wheel.read(next(n for n in wheel.namelist() if n.endswith("entry_points.txt"))).decode()
        assert "[scorer]" in text, plugin


# --- server-side dry run against kube-apiserver 1.20.2 ---


@pytest.mark.kube
def test_every_manifest_passes_a_server_side_dry_run(control_plane, objects) -> None:
    resources = Resources(control_plane)
    namespace = find_object(objects, "Namespace")
    status, _ = resources.apply(namespace)  # for real: the dry runs of the namespaced objects need it
    assert status in (200, 201)
    checked = []
    for obj in objects:
        if obj["kind"] in ("Namespace", "ServiceMonitor"):
            continue
        where = f"{obj['kind']} {obj['metadata']['name']}"
        status, returned = resources.apply(obj, dry_run=True)
        assert status in (200, 201), f"{where}: {status} {returned.get('message', returned)}"
        assert dropped_fields(obj, returned) == [], f"{where}: fields the API server does not know"
        checked.append(obj["kind"])
    assert len(checked) == len(objects) - 2
    # Dry run means nothing was stored (the RBAC test applies its objects itself, for real).
    status, _ = control_plane.request("GET", "/apis/apps/v1/namespaces/scorer-system/deployments/scorer")
    assert status == 404


@pytest.mark.kube
def test_a_dry_run_reports_what_the_server_prunes(control_plane, objects) -> None:
    """The check above would see a misspelt field: the server drops it and dropped_fields says where."""
    resources = Resources(control_plane)
    resources.apply(find_object(objects, "Namespace"))
    deployment = copy.deepcopy(find_object(objects, "Deployment", "scorer"))
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"httpGet": {"path": "/readyz"}}
    status, returned = resources.apply(deployment, dry_run=True)
    assert status in (200, 201)
    assert dropped_fields(deployment, returned) == [".spec.template.spec.containers[0].readinesProbe"]


def install_servicemonitor_crd(control_plane) -> Resources:
    resources = Resources(control_plane)
    crd = yaml.safe_load(CRD_FILE.read_text())
    status, body = resources.apply(crd)
    assert status in (200, 201), body
    path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
    for _ in range(100):  # bounded: Established within a second or two
        status, raw = control_plane.request("GET", path)
        conditions = (json.loads(raw).get("status") or {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return resources
        time.sleep(0.1)
    raise AssertionError(f"the ServiceMonitor CRD was not established: {conditions}")


def dry_run_servicemonitor(control_plane, resources: Resources, monitor: dict[str, Any]) -> tuple[int, dict]:
    for _ in range(50):  # the new group reaches discovery shortly after the CRD is established
        try:
            return resources.apply(monitor, dry_run=True)
        except LookupError:
            resources = Resources(control_plane)
            time.sleep(0.2)
    raise AssertionError("monitoring.coreos.com/v1 ServiceMonitor never served")


@pytest.mark.kube
def test_the_servicemonitor_is_valid_under_its_crd(control_plane, objects) -> None:
    resources = install_servicemonitor_crd(control_plane)
    resources.apply(find_object(objects, "Namespace"))
    monitor = find_object(objects, "ServiceMonitor")
    status, returned = dry_run_servicemonitor(control_plane, resources, monitor)
    assert status in (200, 201), returned
    assert dropped_fields(monitor, returned) == []
    # The CRD's schema is doing the checking: a bad duration is refused, an unknown field pruned.
    broken = copy.deepcopy(monitor)
    broken["spec"]["endpoints"][0]["interval"] = "30 seconds"
    status, returned = dry_run_servicemonitor(control_plane, resources, broken)
    assert status == 422 and "spec.endpoints.interval" in returned["message"].replace("[0]", ""), returned
    unknown = copy.deepcopy(monitor)
    unknown["spec"]["endpoints"][0]["scrapeEvery"] = "30s"
    status, returned = dry_run_servicemonitor(control_plane, resources, unknown)
    assert status in (200, 201) and dropped_fields(unknown, returned) == [".spec.endpoints[0].scrapeEvery"]


def test_the_crd_copy_describes_the_servicemonitor_fields_used() -> None:
    """Without an API server: the fields the ServiceMonitor uses exist in the CRD copy, with their types."""
    crd = yaml.safe_load(CRD_FILE.read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    monitor = yaml.safe_load((K8S_DIR / "servicemonitor.yaml").read_text())

    def check(value: Any, node: dict[str, Any], path: str) -> None:
        if node.get("x-kubernetes-preserve-unknown-fields") or node.get("x-kubernetes-int-or-string"):
            return
        expected = {"object": dict, "array": list, "string": str, "integer": int, "boolean": bool}[node["type"]]
        assert isinstance(value, expected), path
        if "enum" in node:
            assert value in node["enum"], path
        if "pattern" in node:
            assert re.search(node["pattern"], value), path
        if isinstance(value, dict):
            assert set(node.get("required", [])) <= set(value), path
            for key, item in value.items():
                sub = node.get("properties", {}).get(key) or node.get("additionalProperties")
                assert sub is not None, f"{path}.{key} is not a field of the CRD"
                check(item, sub, f"{path}.{key}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                check(item, node["items"], f"{path}[{i}]")

    check(monitor["spec"], schema, "spec")
