"""The scorer command as a user runs it: simulate, explain, config validate, plugins."""

from __future__ import annotations

import json
import textwrap

import pytest
import yaml

from scorer.cli import build_parser, main


@pytest.fixture(autouse=True)
def _no_autoload(monkeypatch):
    monkeypatch.setenv("SCORER_DISABLE_PLUGIN_AUTOLOAD", "1")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


CLUSTER = textwrap.dedent("""
    apiVersion: v1
    kind: Node
    metadata: {name: small}
    status: {allocatable: {cpu: "1", memory: 2Gi, pods: "10"}}
    ---
    apiVersion: v1
    kind: Node
    metadata: {name: big}
    status: {allocatable: {cpu: "8", memory: 16Gi, pods: "10"}}
    ---
    apiVersion: v1
    kind: Node
    metadata: {name: tainted}
    spec: {taints: [{key: dedicated, value: x, effect: NoSchedule}]}
    status: {allocatable: {cpu: "8", memory: 16Gi, pods: "10"}}
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: web, namespace: shop}
    spec: {containers: [{name: c, image: nginx, resources: {requests: {cpu: 500m, memory: 1Gi}}}]}
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: huge, namespace: shop}
    spec: {containers: [{name: c, image: nginx, resources: {requests: {cpu: "16"}}}]}
""")


@pytest.fixture
def cluster_file(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    return str(path)


def test_simulate_demo_cluster(capsys):
    code, out, err = run(capsys, "simulate")
    assert code == 0
    assert "placed" in out and "pods/s" in out
    assert "0/7 nodes are available" in out  # the demo's pods that cannot fit say why
    assert "huge-0" in out


def test_simulate_json(capsys, cluster_file):
    code, out, _ = run(capsys, "simulate", "--cluster", cluster_file, "--output", "json")
    assert code == 0
    data = json.loads(out)
    by_pod = {p["pod"]: p for p in data["placements"]}
    assert by_pod["shop/web"]["node"] == "big"
    assert "NodeResourcesFit" in by_pod["shop/web"]["decidedBy"]
    assert by_pod["shop/huge"]["node"] is None
    assert by_pod["shop/huge"]["message"] == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu."
        " preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    assert data["summary"]["placed"] == 1 and data["summary"]["unschedulable"] == 1


def test_explain_json_contract(capsys, cluster_file):
    code, out, _ = run(capsys, "explain", "--cluster", cluster_file, "--pod", "shop/web", "--output", "json")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"pod", "profile", "nodes", "selected", "message"}
    assert data["pod"] == "shop/web" and data["profile"] == "default-scheduler"
    assert data["selected"] == "big" and data["message"] == ""
    assert set(data["nodes"]) == {"small", "big", "tainted"}
    tainted = data["nodes"]["tainted"]
    assert tainted == {"feasible": False, "scores": {}, "total": 0, "metrics": {},
                       "filter": {"plugin": "TaintToleration", "code": "UnschedulableAndUnresolvable",
                                  "reasons": ["node(s) had untolerated taint(s)"]}}
    big = data["nodes"]["big"]
    assert big["feasible"] and big["filter"] is None
    fit = big["scores"]["NodeResourcesFit"]
    # LeastAllocated: cpu (8000-500)*100/8000 = 93, memory (16-1)*100/16 = 93 -> 93.
    assert fit == {"raw": 93, "normalized": 93, "weight": 1, "weighted": 93}
    assert big["scores"]["TaintToleration"] == {"raw": 0, "normalized": 100, "weight": 3, "weighted": 300}
    assert big["total"] == sum(s["weighted"] for s in big["scores"].values())


def test_explain_unschedulable_exits_zero_with_message(capsys, cluster_file):
    code, out, _ = run(capsys, "explain", "--cluster", cluster_file, "--pod", "shop/huge", "--output", "json")
    assert code == 0
    data = json.loads(out)
    assert data["selected"] is None
    assert data["message"] == ("0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu."
                               " preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    small = data["nodes"]["small"]["filter"]
    assert small == {"plugin": "NodeResourcesFit", "code": "UnschedulableAndUnresolvable",
                     "reasons": ["Insufficient cpu"]}


def test_explain_table(capsys, cluster_file):
    code, out, _ = run(capsys, "explain", "--cluster", cluster_file, "--pod", "shop/web")
    assert code == 0
    assert "big*" in out and "selected: big" in out


@pytest.mark.parametrize(
    ("argv_tail", "needle"),
    [
        (["--pod", "shop/nope"], "pod 'shop/nope' is not in the cluster file"),
        (["--pod", "shop/web", "--config", "/no/such/file.yaml"], "/no/such/file.yaml"),
    ],
)
def test_explain_bad_input_exit_2_one_line(capsys, cluster_file, argv_tail, needle):
    code, out, err = run(capsys, "explain", "--cluster", cluster_file, *argv_tail, "--output", "json")
    assert code == 2
    assert out == ""
    assert needle in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_explain_bad_cluster_file(capsys, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("kind: Pod\nmetadata: {name: p}\n"
                    "spec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n")
    code, _, err = run(capsys, "explain", "--cluster", str(path), "--pod", "p", "--output", "json")
    assert code == 2
    assert "Pod default/p" in err and "spec.containers[0].resources.requests.cpu" in err


def test_config_validate_prints_effective_config(capsys, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent("""
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        profiles:
        - schedulerName: packer
          plugins:
            score:
              enabled: [{name: NodeResourcesFit, weight: 5}]
          pluginConfig:
          - name: NodeResourcesFit
            args: {scoringStrategy: {type: MostAllocated}}
    """))
    code, out, _ = run(capsys, "config", "validate", str(path))
    assert code == 0
    effective = yaml.safe_load(out.split("\n---\n")[0])
    assert effective["profiles"][0]["schedulerName"] == "packer"
    args = effective["profiles"][0]["pluginConfig"][0]["args"]
    assert args["scoringStrategy"]["type"] == "MostAllocated"
    assert args["scoringStrategy"]["resources"] == [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
    assert "NodeResourcesFit" in out.split("\n---\n")[1]


def test_config_validate_errors_name_the_field(capsys, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(textwrap.dedent("""
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        profiles:
        - schedulerName: x
          pluginConfig:
          - name: NodeResourcesFit
            args:
              scoringStrategy:
                type: LeastAllocated
                resources: [{name: cpu, weight: 500}]
          plugins:
            score:
              enabled: [{name: NoSuchPlugin}]
    """))
    code, _, err = run(capsys, "config", "validate", str(path))
    assert code != 0
    assert "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight" in err
    assert "NoSuchPlugin" in err
    assert "Traceback" not in err


def test_plugins_lists_builtins(capsys):
    code, out, _ = run(capsys, "plugins", "--output", "json")
    assert code == 0
    listed = json.loads(out)
    assert set(listed) == {"plugins", "failedDistributions"}  # the failures: tests/test_plugin_mistakes.py
    data = {p["name"]: p for p in listed["plugins"]}
    assert data["NodeResourcesFit"]["distribution"] == "scorer"
    assert data["NodeResourcesFit"]["extensionPoints"] == ["preFilter", "filter", "preScore", "score"]
    code, out, _ = run(capsys, "plugins")
    assert "TaintToleration" in out and "EXTENSION POINTS" in out


# --- escaping of user-controlled strings in human-readable output ------------------------------------

FORGED = "x\nshop/web  big  100  forged"


def test_escape_controls_bidi_and_surrogates():
    from scorer.cli import escape

    assert escape("plain-name.1") == "plain-name.1"
    assert escape("a\nb\tc\rd") == "a\\nb\\tc\\rd"
    assert escape("\x1b[31mred\x1b[0m\x07\x00\x7f") == "\\x1b[31mred\\x1b[0m\\x07\\x00\\x7f"
    assert escape("\x9b2J\x85") == "\\x9b2J\\x85"  # C1 controls (CSI, NEL)
    assert escape("abc\u202edef\u2066\u200b\u2028\ufeff") == "abc\\u202edef\\u2066\\u200b\\u2028\\ufeff"
    assert escape("\udc80\U000e0041") == "\\udc80\\U000e0041"
    assert escape("ünïcödé 名前 back\\slash") == "ünïcödé 名前 back\\slash"  # printable text and backslashes kept


def forged_cluster(tmp_path, node_name=FORGED, pod_name=FORGED):
    path = tmp_path / "forged.yaml"
    docs = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name},
         "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod_name, "namespace": "shop"},
         "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big\x1b[2J", "namespace": "shop"},
         "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "64"}}}]}},
    ]
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def test_simulate_table_escapes_names(capsys, tmp_path):
    code, out, _ = run(capsys, "simulate", "--cluster", forged_cluster(tmp_path))
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 1 + 2 + 2  # header, two pods, blank line, summary: no forged line
    assert lines[1].startswith("shop/x\\nshop/web  big  100  forged  x\\nshop/web  big  100  forged")
    assert lines[2].startswith("shop/big\\x1b[2J")
    assert "\x1b" not in out and "\n".join(lines) + "\n" == out


def test_simulate_json_keeps_names_exact(capsys, tmp_path):
    code, out, _ = run(capsys, "simulate", "--cluster", forged_cluster(tmp_path), "--output", "json")
    assert code == 0
    assert "\x1b" not in out  # JSON escapes control characters itself
    pods = {p["pod"]: p for p in json.loads(out)["placements"]}
    assert pods[f"shop/{FORGED}"]["node"] == FORGED
    assert "shop/big\x1b[2J" in pods


def test_explain_table_escapes_names(capsys, tmp_path):
    code, out, _ = run(capsys, "explain", "--cluster", forged_cluster(tmp_path), "--pod", f"shop/{FORGED}")
    assert code == 0
    assert "\x1b" not in out and "forged" in out
    assert not any(line.startswith("shop/web") for line in out.splitlines())
    assert "x\\nshop/web  big  100  forged*" in out  # the node row, marked selected
    assert "selected: x\\nshop/web  big  100  forged" in out


def test_explain_json_keeps_names_exact(capsys, tmp_path):
    code, out, _ = run(capsys, "explain", "--cluster", forged_cluster(tmp_path), "--pod", f"shop/{FORGED}",
                       "--output", "json")
    assert code == 0
    data = json.loads(out)
    assert data["selected"] == FORGED and data["pod"] == f"shop/{FORGED}"


def test_error_message_escapes_names(capsys, tmp_path):
    code, out, err = run(capsys, "explain", "--cluster", forged_cluster(tmp_path), "--pod", "shop/no\x1b]0;pwned\x07")
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1
    assert "\x1b" not in err and "\x07" not in err
    assert "no\\x1b]0;pwned\\x07" in err


def _plugin_module(name, factory=None, error=None):
    """A plugin distribution stand-in registering one score plugin called ``name``."""
    from types import SimpleNamespace

    from scorer.hookspecs import hookimpl

    class Plugin:
        def score(self, state, pod, node):
            return 0

    def default_factory(args, handle):
        if error is not None:
            raise error
        plugin = Plugin()
        plugin.name = name
        return plugin

    @hookimpl
    def scorer_register_plugins(registry):
        registry.register(name, factory or default_factory, plugin_type=Plugin)

    return SimpleNamespace(__name__="fake_dist", scorer_register_plugins=scorer_register_plugins)


def _use_registry(monkeypatch, *modules, failures=()):
    import scorer.cli
    from scorer.registry import build_registry

    def fake(**kwargs):
        registry = build_registry(autoload=False, modules=modules)
        registry.failures.extend(failures)
        return registry

    monkeypatch.setattr(scorer.cli, "build_registry", fake)


def test_plugins_table_and_load_failures_escaped(capsys, monkeypatch):
    from scorer.framework.catalog import LoadFailure

    _use_registry(monkeypatch, _plugin_module("Evil\nForged  scorer  1.0  score\x1b[8m"),
                  failures=[LoadFailure("bad\nep", "dist\x1b[31m", "1.0", "ImportError: no\nmodule")])
    code, out, err = run(capsys, "plugins")
    assert code == 0
    assert "Evil\\nForged  scorer  1.0  score\\x1b[8m" in out
    assert not any(line.startswith("Forged") for line in out.splitlines())
    assert "dist\\x1b[31m  1.0      --block-plugin bad\\nep  -        ImportError: no\\nmodule" in out
    assert err.count("\n") == 1
    assert err.startswith("warning: dist\\x1b[31m 1.0 (entry point bad\\nep) failed to load: ImportError: no\\nmodule;")
    assert "\x1b" not in out + err


# --- exit codes ----------------------------------------------------------------------------------------

BAD_CONFIG = textwrap.dedent("""
    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    profiles:
    - schedulerName: x
      percentageOfNodesToScore: 500
      plugins:
        score:
          enabled: [{name: "No\\nSuch\\e[31m"}]
""")


@pytest.mark.parametrize("command", [["config", "validate"], ["simulate", "--config"],
                                     ["explain", "--pod", "shop/web", "--config"]])
def test_config_errors_exit_2_one_line_per_error(capsys, tmp_path, cluster_file, command):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD_CONFIG)
    cluster = [] if command[0] == "config" else ["--cluster", cluster_file]
    code, out, err = run(capsys, *command, str(path), *cluster)
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 2 and all(line.startswith(f"error: {path}: profiles[0].") for line in lines)
    assert any("percentageOfNodesToScore" in line for line in lines)
    assert any('"No\\nSuch\\x1b[31m"' in line for line in lines)


@pytest.mark.parametrize("command", [["simulate"], ["explain", "--pod", "shop/web"]])
def test_plugin_that_cannot_start_exits_2(capsys, tmp_path, monkeypatch, cluster_file, command):
    _use_registry(monkeypatch, _plugin_module("Picky", error=ValueError("args.address: Required value")))
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent("""
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        profiles:
        - schedulerName: default-scheduler
          plugins: {score: {enabled: [{name: Picky}]}}
    """))
    code, out, err = run(capsys, *command, "--cluster", cluster_file, "--config", str(config))
    assert code == 2 and out == ""
    assert err.startswith('error: plugin "Picky"') and "args.address: Required value" in err
    assert len(err.splitlines()) == 1


def test_bad_cluster_file_exits_2_in_simulate(capsys, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("kind: Pod\nmetadata: {name: p}\n"
                    "spec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n")
    code, out, err = run(capsys, "simulate", "--cluster", str(path))
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "spec.containers[0].resources.requests.cpu" in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("debug", ["", "1"])
def test_internal_error_one_line_exit_1(capsys, monkeypatch, cluster_file, debug):
    import scorer.cli

    def broken(*args, **kwargs):
        raise TypeError("unsupported operand\nsecond line")

    monkeypatch.setattr(scorer.cli, "simulate", broken)
    monkeypatch.setenv("SCORER_DEBUG", debug)
    code, out, err = run(capsys, "simulate", "--cluster", cluster_file)
    assert code == 1 and out == ""
    last = err.splitlines()[-1]
    assert last.startswith("internal error: TypeError: unsupported operand\\nsecond line")
    assert "please report it" in last and "SCORER_DEBUG=1" in last
    if debug:
        assert err.startswith("Traceback (most recent call last):") and "in broken" in err
    else:
        assert "Traceback" not in err and len(err.splitlines()) == 1


def test_other_scorer_error_exits_1(capsys, monkeypatch, cluster_file):
    import scorer.cli
    from scorer.errors import ScorerError

    def conflict(*args, **kwargs):
        raise ScorerError("pod shop/web is already bound")

    monkeypatch.setattr(scorer.cli, "simulate", conflict)
    code, _, err = run(capsys, "simulate", "--cluster", cluster_file)
    assert (code, err) == (1, "error: pod shop/web is already bound\n")


class _FailingStdout:
    """A standard output whose writes fail like a closed pipe or a full disk."""

    def __init__(self, error):
        self.error = error
        self.writes = 0

    def write(self, text):
        self.writes += 1
        raise self.error

    def flush(self):
        raise self.error


def test_broken_pipe_exits_141_quietly(capsys, monkeypatch, cluster_file):
    monkeypatch.setattr("sys.stdout", _FailingStdout(BrokenPipeError(32, "Broken pipe")))
    code = main(["simulate", "--cluster", cluster_file])
    _, err = capsys.readouterr()
    assert code == 141
    assert "Traceback" not in err and "Broken pipe" not in err


def test_unwritable_stdout_exits_1_with_error(capsys, monkeypatch, cluster_file):
    stdout = _FailingStdout(OSError(28, "No space left on device"))
    monkeypatch.setattr("sys.stdout", stdout)
    code = main(["plugins", "--output", "json"])
    _, err = capsys.readouterr()
    assert code == 1 and stdout.writes == 1
    assert err == "error: cannot write the output: [Errno 28] No space left on device\n"


def test_closed_stdout_exits_1(capsys, monkeypatch, cluster_file):
    monkeypatch.setattr("sys.stdout", None)  # what Python sets when started with file descriptor 1 closed
    code = main(["simulate", "--cluster", cluster_file])
    _, err = capsys.readouterr()
    assert code == 1
    assert err == "error: cannot write the output: standard output is closed\n"


@pytest.mark.parametrize(("argv", "needle"), [
    ([], "the following arguments are required: COMMAND (see 'scorer --help')"),
    (["simulate", "--output", "xml"], "argument --output: invalid choice: 'xml'"),
    (["explain"], "the following arguments are required: --pod (see 'scorer explain --help')"),
    (["simulate", "--seed", "1\x1b[2J"], "argument --seed: invalid int value: '1\\x1b[2J'"),
])
def test_usage_errors_one_line_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and needle in err and len(err.splitlines()) == 1


def test_missing_file_with_newline_in_its_name(capsys, tmp_path):
    code, _, err = run(capsys, "simulate", "--cluster", str(tmp_path / "a\nb\x1b[31m.yaml"))
    assert code == 2 and len(err.splitlines()) == 1
    assert "a\\nb\\x1b[31m.yaml" in err


def test_help_documents_exit_codes(capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "exit status:" in out
    for code in ("0 ", "1 ", "2 ", "130 ", "141 "):
        assert f"\n  {code}" in out
    assert main(["--version"]) == 0
    assert main(["simulate", "--no-such-option"]) == 2


def _scorer(*argv, **kwargs):
    import subprocess
    import sys

    env = {**__import__("os").environ, "SCORER_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.Popen([sys.executable, "-m", "scorer", *argv], stderr=subprocess.PIPE, env=env, **kwargs)


@pytest.mark.slow
def test_process_reader_gone_exits_141_without_traceback(cluster_file):
    import subprocess

    proc = _scorer("simulate", "--cluster", cluster_file, stdout=subprocess.PIPE)
    proc.stdout.close()  # the reader goes away before scorer writes (scorer simulate | head -0)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err and "Exception ignored" not in err and "BrokenPipe" not in err


@pytest.mark.slow
def test_process_closed_stdout_exits_1(cluster_file):
    import os

    proc = _scorer("simulate", "--cluster", cluster_file, preexec_fn=lambda: os.close(1))
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1
    assert err.splitlines()[-1] == "error: cannot write the output: standard output is closed"


@pytest.mark.slow
def test_process_full_disk_exits_1(cluster_file):
    with open("/dev/full", "w") as full:
        proc = _scorer("simulate", "--cluster", cluster_file, stdout=full)
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 1
    assert err.splitlines()[-1] == "error: cannot write the output: [Errno 28] No space left on device"
    assert "Exception ignored" not in err


def test_config_validate_escapes_scheduler_name(capsys, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": 'a\nprofile "forged" (percentageOfNodesToScore: 1%)\x1b[8m'}]}))
    code, out, _ = run(capsys, "config", "validate", str(path))
    assert code == 0
    effective, described = out.split("\n---\n")
    assert yaml.safe_load(effective)["profiles"][0]["schedulerName"].startswith("a\nprofile")  # exact YAML
    assert 'profile "a\\nprofile "forged" (percentageOfNodesToScore: 1%)\\x1b[8m"' in described
    assert not any(line.startswith('profile "forged"') for line in out.splitlines())
    assert "\x1b" not in out


CONSTRAINED = CLUSTER + textwrap.dedent("""
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: db-0, namespace: shop, labels: {app: db}}
    spec:
      containers: [{name: c, image: postgres}]
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - {labelSelector: {matchLabels: {app: db}}, topologyKey: kubernetes.io/hostname}
      volumes: [{name: data, persistentVolumeClaim: {claimName: data-db-0}}]
""")
# The anti-affinity is evaluated by InterPodAffinity; the claim, which the file does not hold, keeps the pod
# out: VolumeRestrictions (the first volume plugin in kube's order) looks it up at PreFilter, as kube does.
CONSTRAINED_MESSAGE = (
    '0/3 nodes are available: persistentvolumeclaim "data-db-0" not found. preemption: 0/3 nodes are available: '
    "3 Preemption is not helpful for scheduling."
)


@pytest.fixture
def constrained_file(tmp_path):
    path = tmp_path / "constrained.yaml"
    path.write_text(CONSTRAINED)
    return str(path)


def test_simulate_names_the_missing_claim_of_a_pod(capsys, constrained_file):
    code, out, _ = run(capsys, "simulate", "--cluster", constrained_file, "--output", "json")
    assert code == 0
    by_pod = {p["pod"]: p for p in json.loads(out)["placements"]}
    assert by_pod["shop/db-0"]["node"] is None and by_pod["shop/db-0"]["message"] == CONSTRAINED_MESSAGE
    assert by_pod["shop/web"]["node"] == "big"
    code, out, _ = run(capsys, "simulate", "--cluster", constrained_file)
    [line] = [line for line in out.splitlines() if "shop/db-0" in line]
    assert 'persistentvolumeclaim "data-db-0" not found' in line and "InterPodAffinity" not in line


def test_explain_shows_the_pre_filter_rejection_naming_the_plugin(capsys, constrained_file):
    code, out, _ = run(capsys, "explain", "--cluster", constrained_file, "--pod", "shop/db-0", "--output", "json")
    assert code == 0
    data = json.loads(out)
    assert data["selected"] is None and data["message"] == CONSTRAINED_MESSAGE
    for node in data["nodes"].values():
        assert node == {"feasible": False, "scores": {}, "total": 0, "metrics": {},
                        "filter": {"plugin": "VolumeRestrictions", "code": "UnschedulableAndUnresolvable",
                                   "reasons": ['persistentvolumeclaim "data-db-0" not found']}}
    code, out, _ = run(capsys, "explain", "--cluster", constrained_file, "--pod", "shop/db-0")
    assert code == 0
    assert f"unschedulable: {CONSTRAINED_MESSAGE}" in out
    assert out.count('VolumeRestrictions (UnschedulableAndUnresolvable): persistentvolumeclaim "data-db-0"') == 3


VOLUMES = textwrap.dedent("""
    apiVersion: v1
    kind: List
    items:
    - apiVersion: v1
      kind: Node
      metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
      status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
    - apiVersion: v1
      kind: Node
      metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}
      status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
    - apiVersion: storage.k8s.io/v1
      kind: StorageClass
      metadata: {name: local}
      provisioner: kubernetes.io/no-provisioner
      volumeBindingMode: WaitForFirstConsumer
    - apiVersion: v1
      kind: PersistentVolume
      metadata: {name: pv-n2}
      spec:
        capacity: {storage: 10Gi}
        accessModes: [ReadWriteOnce]
        storageClassName: local
        local: {path: /mnt/disk}
        nodeAffinity:
          required:
            nodeSelectorTerms:
            - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n2]}]
      status: {phase: Available}
    - apiVersion: v1
      kind: PersistentVolumeClaim
      metadata: {name: data-db-0, namespace: shop}
      spec:
        accessModes: [ReadWriteOnce]
        storageClassName: local
        resources: {requests: {storage: 1Gi}}
    - apiVersion: v1
      kind: Pod
      metadata: {name: db-0, namespace: shop}
      spec:
        containers: [{name: c, image: postgres}]
        volumes: [{name: data, persistentVolumeClaim: {claimName: data-db-0}}]
""")


def test_explain_and_simulate_show_the_volume_decisions(capsys, tmp_path):
    path = tmp_path / "volumes.yaml"
    path.write_text(VOLUMES)
    code, out, _ = run(capsys, "explain", "--cluster", str(path), "--pod", "shop/db-0", "--output", "json")
    assert code == 0
    data = json.loads(out)
    assert data["selected"] == "n2" and data["volumes"] == {"data-db-0": "binds PersistentVolume pv-n2"}
    assert data["nodes"]["n1"]["filter"] == {"plugin": "VolumeBinding", "code": "UnschedulableAndUnresolvable",
                                             "reasons": ["node(s) didn't find available persistent volumes to bind"]}
    code, out, _ = run(capsys, "explain", "--cluster", str(path), "--pod", "shop/db-0")
    assert "claim data-db-0: binds PersistentVolume pv-n2" in out
    code, out, _ = run(capsys, "simulate", "--cluster", str(path), "--output", "json")
    [placement] = json.loads(out)["placements"]
    assert placement["node"] == "n2" and placement["volumes"] == {"data-db-0": "pv-n2"}
    code, out, _ = run(capsys, "simulate", "--cluster", str(path))
    assert "volumes: data-db-0->pv-n2" in out


def test_the_command_loads_the_bench_only_to_run_it():
    """``scorer run`` (every command but ``bench``) is built without loading the bench's modules: only its
    options (``scorer.bench.options``) come with the parser."""
    import subprocess
    import sys

    code = ("import sys, scorer.cli; scorer.cli.build_parser().parse_args(['bench', '--e2e']); "
            "print(sorted(m for m in sys.modules if m.startswith('scorer.bench.')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.strip() == "['scorer.bench.options']"
