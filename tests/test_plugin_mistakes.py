"""A plugin author's mistakes (issue 21), each in a real distribution found through its entry
point: the message names the plugin and the distribution and says what was expected, and
``scorer plugins`` and an unrelated ``scorer simulate`` still exit 0.

Distributions are installed by writing a module and its ``.dist-info`` (METADATA and
entry_points.txt) into a directory on ``sys.path``: what pip leaves, without pip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scorer.cli import main

REPO = Path(__file__).resolve().parents[1]
DIST = "scorer-tier"
VERSION = "0.2.0"
ENTRY_POINT = "tier"

CLUSTER = textwrap.dedent("""
    kind: List
    items:
    - {kind: Node, metadata: {name: plain}, status: {allocatable: {cpu: "8", memory: 16Gi, pods: "20"}}}
    - kind: Node
      metadata: {name: gold, labels: {tier: gold}}
      status: {allocatable: {cpu: "8", memory: 16Gi, pods: "20"}}
    - {kind: Pod, metadata: {name: web}, spec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}}
""")

# The plugin as its author meant it; each mistake below replaces a part of it.
HEADER = """
    import attrs
    import numpy as np
    from scorer.plugin import Code, Status, hookimpl

    NAME = "Tier"
"""
ARGS = """
    @attrs.frozen
    class TierArgs:
        label: str = "tier"
"""
PLUGIN = """
    class Tier:
        name = NAME

        def __init__(self, args):
            self.label = args.label if args is not None else "tier"

        def score(self, state, pod, node):
            return 100 if self.label in node.node.labels else 0
"""
HOOK = """
    @hookimpl
    def scorer_register_plugins(registry):
        registry.register(NAME, lambda args, handle: Tier(args), args_type=TierArgs, plugin_type=Tier)
"""


def distribution_source(**parts: str) -> str:
    chosen = {"header": HEADER, "args": ARGS, "plugin": PLUGIN, "hook": HOOK, **parts}
    return "".join(textwrap.dedent(chosen[key]) for key in ("header", "args", "plugin", "hook"))


@pytest.fixture
def install(tmp_path, monkeypatch):
    """``install(source)``: a distribution scorer-tier 0.2.0 whose entry point ``tier`` is a module
    with ``source``, importable and found by ``importlib.metadata`` for this test only."""
    site = tmp_path / "site"
    site.mkdir()
    module = f"tier_{os.urandom(4).hex()}"  # a fresh module name: nothing cached from another test
    monkeypatch.delenv("SCORER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("SCORER_DEBUG", raising=False)

    def write(source: str) -> Path:
        (site / f"{module}.py").write_text(source)
        info = site / f"scorer_tier-{VERSION}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: {VERSION}\n")
        (info / "entry_points.txt").write_text(f"[scorer]\n{ENTRY_POINT} = {module}\n")
        monkeypatch.syspath_prepend(str(site))
        return site

    yield write
    sys.modules.pop(module, None)


@pytest.fixture
def files(tmp_path):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    return tmp_path, str(cluster)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def config_file(directory: Path, args: dict | None = None, name: str = "Tier") -> str:
    profile: dict = {"schedulerName": "default-scheduler",
                     "plugins": {"multiPoint": {"enabled": [{"name": name, "weight": 2}]}}}
    if args is not None:
        profile["pluginConfig"] = [{"name": name, "args": args}]
    path = directory / "tier-config.yaml"
    path.write_text(json.dumps({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                                "profiles": [profile]}))
    return str(path)


def assert_scorer_still_runs(capsys, cluster: str) -> tuple[str, str]:
    """``scorer plugins`` and an unrelated ``scorer simulate`` exit 0; returns what ``plugins`` printed."""
    code, out, err = run(capsys, "plugins")
    assert code == 0, err
    code, sim_out, sim_err = run(capsys, "simulate", "--cluster", cluster, "--output", "json")
    assert code == 0, sim_err
    assert json.loads(sim_out)["summary"]["placed"] == 1
    return out, err


# -- item 4: a broken distribution is isolated, the same way for every mistake ----------------------

BROKEN = {
    "import-error": (
        {"header": HEADER + "    import tier_helpers_that_do_not_exist\n"},
        (), "cannot import {module}: ModuleNotFoundError: No module named 'tier_helpers_that_do_not_exist'"),
    "plugin-api-major": (
        {"header": HEADER + '    SCORER_PLUGIN_API = "2.0"\n'},
        (), "built for plugin API 2.0 (SCORER_PLUGIN_API), but scorer 0.1.0 provides plugin API 1.0: install a "
            "release of scorer-tier built for plugin API 1.x"),
    "plugin-api-minor": (
        {"header": HEADER + '    SCORER_PLUGIN_API = "1.1"\n'},
        (), "built for plugin API 1.1 (SCORER_PLUGIN_API), but scorer 0.1.0 provides plugin API 1.0: upgrade "
            "scorer to a release that provides plugin API 1.1"),
    "misspelled-hook": (
        {"hook": HOOK.replace("def scorer_register_plugins", "def scorer_register_plugin")},
        (), "unknown hook scorer_register_plugin (did you mean scorer_register_plugins?)"),
    "hook-not-marked": (
        {"hook": HOOK.replace("    @hookimpl\n", "")},
        (), "scorer_register_plugins is not marked with @scorer.plugin.hookimpl, so it is never called"),
    "hook-signature": (
        {"hook": HOOK.replace("scorer_register_plugins(registry):\n        registry.",
                              "scorer_register_plugins(reg):\n        reg.")},
        (), "its hook does not match scorer_register_plugins(registry): hookimpl definition: "
            "scorer_register_plugins(reg); Argument(s) {'reg'} are declared in the hookimpl but can not be "
            "found in the hookspec"),
    "hook-raises": (
        {"hook": HOOK.replace("    registry.register", "    raise RuntimeError('TIER_HOME is not set')\n"
                                                        "        registry.register")},
        (), "scorer_register_plugins raised RuntimeError: TIER_HOME is not set"),
    "no-plugin-type": (
        {"hook": HOOK.replace(", plugin_type=Tier", "")},
        ("Tier",), "plugin 'Tier' implements no extension point: pass plugin_type=<the plugin's class> to "
                   "registry.register(), or register the class itself as the factory"),
    "method-signature": (
        {"plugin": PLUGIN.replace("def score(self, state, pod, node)", "def score(self, pod, node)")},
        ("Tier",), "plugin 'Tier': score(self, pod, node) cannot be called as score(state, pod, node) "
                   "(NodeScorePlugin)"),
    "name-clash": (
        {"header": HEADER.replace('NAME = "Tier"', 'NAME = "NodeName"')},
        ("NodeName",), "plugin 'NodeName' is already registered by scorer 0.1.0: plugin names are unique; "
                       "rename yours"),
    "args-not-attrs": (
        {"args": "\nclass TierArgs:\n    label = 'tier'\n"},
        ("Tier",), "plugin 'Tier': args_type TierArgs is not an attrs class (decorate it with @attrs.frozen)"),
    "args-field-type": (
        {"args": ARGS.replace('label: str = "tier"', "labels: set[str] = attrs.Factory(set)")},
        ("Tier",), "plugin 'Tier': args_type TierArgs.labels: unsupported field type set[str] (supported: "),
    "args-validate-signature": (
        {"args": ARGS + "\n        def validate(self, strict):\n            return []\n"},
        ("Tier",), "plugin 'Tier': args_type TierArgs.validate must be a method taking no arguments"),
}


@pytest.mark.parametrize("mistake", list(BROKEN))
def test_a_broken_distribution_is_reported_and_scorer_runs_without_it(capsys, install, files, mistake):
    parts, plugins, reason = BROKEN[mistake]
    site = install(distribution_source(**parts))
    directory, cluster = files
    module = next(site.glob("tier_*.py")).stem
    reason = reason.replace("{module}", module)

    out, err = assert_scorer_still_runs(capsys, cluster)
    # Every command warns, naming the distribution, the entry point to block and the reason.
    warning = next(line for line in err.splitlines() if DIST in line)
    assert warning.startswith(f"warning: {DIST} {VERSION} (entry point {ENTRY_POINT}) failed to load: ")
    assert reason in warning and warning.endswith(f"(--block-plugin {ENTRY_POINT} stops loading it)")
    # ``scorer plugins`` lists it under the loaded plugins: distribution, how to skip it, plugins, reason.
    listed = out.split("failed to load; scorer runs without their plugins:\n")[1]
    row = next(line for line in listed.splitlines() if line.startswith(DIST))
    assert f"--block-plugin {ENTRY_POINT}" in row and reason in row
    assert (", ".join(plugins) or "-") in row
    assert "NodeName" in out.split("\n\n")[0]  # a clash leaves the built-in in place
    # The same in ``scorer plugins --output json``, apart from the plugins that loaded.
    code, out, _ = run(capsys, "plugins", "--output", "json")
    listed = json.loads(out)
    assert code == 0 and "NodeName" in {p["name"] for p in listed["plugins"]}
    [failed] = listed["failedDistributions"]
    assert reason in failed.pop("error")
    assert failed == {"distribution": DIST, "version": VERSION, "entryPoint": ENTRY_POINT, "plugins": list(plugins)}

    # A profile that enables the plugin: exit 2, naming the distribution and the reason.
    code, out, err = run(capsys, "simulate", "--cluster", cluster, "--config", config_file(directory))
    assert (code, out) == (2, "")
    [error] = [line for line in err.splitlines() if line.startswith("error: ")]
    assert f"{DIST} {VERSION} (entry point {ENTRY_POINT}) failed to load: " in error and reason in error
    if plugins == ("Tier",):  # the name it tried to register: said so
        assert 'plugin "Tier" is not available: ' in error
    elif not plugins:  # never got as far as registering: the failure is named as a possible cause
        assert 'unknown plugin "Tier"; ' in error

    # --block-plugin ENTRY_POINT: not loaded, not reported.
    code, out, err = run(capsys, "plugins", "--block-plugin", ENTRY_POINT)
    assert code == 0 and DIST not in out + err


def test_distribution_failures_are_apart_from_the_json_plugin_list(capsys, install):
    install(distribution_source(hook=HOOK.replace(", plugin_type=Tier", "")))
    code, out, err = run(capsys, "plugins", "--output", "json")
    assert code == 0
    listed = json.loads(out)
    assert "Tier" not in {p["name"] for p in listed["plugins"]}
    assert [(f["entryPoint"], f["plugins"]) for f in listed["failedDistributions"]] == [(ENTRY_POINT, ["Tier"])]
    assert f"warning: {DIST} {VERSION} (entry point {ENTRY_POINT}) failed to load: plugin 'Tier'" in err


# -- item 5: args checked --------------------------------------------------------------------------


@pytest.mark.parametrize(("validate", "message"), [
    ("return [('', 1 / 0)]",
     "TierArgs.validate() of plugin \"Tier\" (scorer-tier 0.2.0) raised ZeroDivisionError: division by zero"),
    ("return ['label must not be empty']",
     "TierArgs.validate() of plugin \"Tier\" (scorer-tier 0.2.0) returned ['label must not be empty'], expected "
     'a list of (path, message) pairs of strings, such as [("weight", "must be in 1..100")]'),
])
def test_a_validate_that_fails_is_a_config_error_naming_plugin_and_distribution(capsys, install, files, validate,
                                                                                 message):
    install(distribution_source(args=ARGS + f"\n        def validate(self):\n            {validate}\n"))
    directory, cluster = files
    assert_scorer_still_runs(capsys, cluster)
    code, out, err = run(capsys, "simulate", "--cluster", cluster, "--config", config_file(directory, {"label": "x"}))
    assert (code, out) == (2, "")
    assert err == f"error: {directory / 'tier-config.yaml'}: profiles[0].pluginConfig[0].args: {message}\n"


def test_validate_pairs_are_reported_at_their_paths(capsys, install, files):
    install(distribution_source(args=ARGS + "\n        def validate(self):\n            return [('label', "
                                             "'must not be empty')] if not self.label else []\n"))
    directory, cluster = files
    code, _, err = run(capsys, "simulate", "--cluster", cluster, "--config", config_file(directory, {"label": ""}))
    assert code == 2
    assert err.endswith("profiles[0].pluginConfig[0].args.label: must not be empty\n")


def test_args_given_to_a_plugin_without_an_args_type_are_refused(capsys, install, files):
    install(distribution_source(hook=HOOK.replace("args_type=TierArgs, ", "")))
    directory, cluster = files
    assert_scorer_still_runs(capsys, cluster)
    code, out, err = run(capsys, "simulate", "--cluster", cluster, "--config", config_file(directory, {"label": "x"}))
    assert (code, out) == (2, "")
    assert err == (f"error: {directory / 'tier-config.yaml'}: profiles[0].pluginConfig[0].args: plugin \"Tier\" "
                   f"({DIST} {VERSION}) takes no args: it registers no args_type to check them against; remove the "
                   "args (or, as its author, register an args class)\n")
    # Without args it runs, and its factory gets None.
    code, out, err = run(capsys, "simulate", "--cluster", cluster, "--config", config_file(directory))
    assert code == 0, err


# -- item 6: runtime errors name the plugin, its distribution and the exception ----------------------

SCORE_ERRORS = {
    "raises": ("def score(self, state, pod, node):\n            raise KeyError('tier')",
               "KeyError: 'tier'"),
    "float-scores": ("def score_batch(self, state, pod, nodes):\n            return np.full(len(nodes), 50.7)",
                     "TypeError: returned an array of float64, expected integer scores, one per node (an int64 "
                     "array: round floats with np.rint(scores).astype(np.int64))"),
    "float-score": ("def score(self, state, pod, node):\n            return 50.7",
                    "TypeError: returned 50.7 for node \"plain\", expected an int"),
}


@pytest.mark.parametrize("mistake", list(SCORE_ERRORS))
def test_a_score_plugin_error_names_plugin_distribution_and_exception(capsys, install, files, mistake):
    method, exception = SCORE_ERRORS[mistake]
    install(distribution_source(plugin=PLUGIN.replace(
        "def score(self, state, pod, node):\n            return 100 if self.label in node.node.labels else 0",
        method)))
    directory, cluster = files
    assert_scorer_still_runs(capsys, cluster)
    message = f'running Score plugin "Tier" ({DIST} {VERSION}): {exception}'
    config = config_file(directory)

    code, out, err = run(capsys, "simulate", "--cluster", cluster, "--config", config, "--output", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["summary"]["errors"] == 1
    assert data["placements"][0]["message"] == message

    code, out, err = run(capsys, "explain", "--cluster", cluster, "--config", config, "--pod", "web",
                         "--output", "json")
    assert code == 0, err
    explained = json.loads(out)
    assert explained["error"] == {"point": "Score", "plugin": "Tier", "distribution": f"{DIST} {VERSION}",
                                  "message": message}
    assert explained["selected"] is None and explained["message"] == message

    code, out, _ = run(capsys, "explain", "--cluster", cluster, "--config", config, "--pod", "web")
    assert code == 0
    lines = out.splitlines()
    header = lines[1].split()
    assert "Tier" in header  # its column is kept ...
    assert all(line.split()[header.index("Tier")] == "error" for line in lines[2:4])  # ... marked for each node
    assert lines[4] == f"error: {message}" and "unschedulable" not in out


def test_the_pods_event_names_plugin_distribution_and_exception(install, files, monkeypatch):
    from scorer.model import load_file
    from scorer.simulate import simulate

    install(distribution_source(plugin=PLUGIN.replace("return 100 if", "raise ValueError('no tier label')\n"
                                                                       "            return 100 if")))
    directory, cluster = files
    report = simulate(load_file(cluster), config_file(directory))
    notes = [event.note for event in report.cluster.events if event.reason == "FailedScheduling"]
    assert notes and set(notes) == {f'running Score plugin "Tier" ({DIST} {VERSION}): ValueError: no tier label'}


def test_a_rejection_with_a_bare_string_is_one_reason(capsys, install, files):
    install(distribution_source(plugin=PLUGIN + (
        "\n        def filter(self, state, pod, node):\n"
        "            if self.label not in node.node.labels:\n"
        "                return Status(Code.UNSCHEDULABLE, 'no tier label')\n")))
    directory, cluster = files
    code, out, _ = run(capsys, "explain", "--cluster", cluster, "--config", config_file(directory), "--pod", "web",
                       "--output", "json")
    assert code == 0
    data = json.loads(out)
    assert data["selected"] == "gold"
    assert data["nodes"]["plain"]["filter"] == {"plugin": "Tier", "code": "Unschedulable",
                                                "reasons": ["no tier label"]}


def test_scorer_debug_prints_the_plugins_traceback(tmp_path, install, files):
    site = install(distribution_source(plugin=PLUGIN.replace("return 100 if", "raise ValueError('no tier label')\n"
                                                                              "            return 100 if")))
    directory, cluster = files
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]), "SCORER_DEBUG": "1"}
    env.pop("SCORER_DISABLE_PLUGIN_AUTOLOAD", None)
    argv = [sys.executable, "-m", "scorer", "simulate", "--cluster", cluster, "--config", config_file(directory)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback (most recent call last):" in done.stderr
    assert "raise ValueError('no tier label')" in done.stderr  # the plugin's own line
    assert f'running Score plugin "Tier" ({DIST} {VERSION}): ValueError: no tier label' in done.stderr
    env["SCORER_DEBUG"] = "0"
    quiet = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert quiet.returncode == 0 and "Traceback" not in quiet.stderr


def test_scorer_run_logs_each_failed_distribution(install, files, monkeypatch, caplog):
    from types import SimpleNamespace

    import scorer.cli
    from scorer.registry import build_registry

    install(distribution_source(hook=HOOK.replace(", plugin_type=Tier", "")))
    directory, _ = files

    async def serve(service):
        return 0

    monkeypatch.setattr(scorer.cli.logs, "configure", lambda log_format: None)
    monkeypatch.setattr(scorer.cli, "build_service", lambda options: SimpleNamespace(
        asm=SimpleNamespace(registry=build_registry(blocked=options.blocked), warnings=())))
    monkeypatch.setattr(scorer.cli, "serve", serve)
    with caplog.at_level("WARNING", logger="scorer.service"):
        assert main(["run", "--config", config_file(directory)]) == 0
    assert [r.getMessage() for r in caplog.records if DIST in r.getMessage()] == [
        f"{DIST} {VERSION} (entry point {ENTRY_POINT}) failed to load: plugin 'Tier' implements no extension point: "
        "pass plugin_type=<the plugin's class> to registry.register(), or register the class itself as the factory; "
        f"scorer runs without its plugins (--block-plugin {ENTRY_POINT} stops loading it)"]
