"""The README's main command: `scorer simulate` on the built-in demo cluster uses the
metric-driven profile (the contrib plugins read the demo's MetricsSnapshot)."""

from __future__ import annotations

import json

import pytest

from scorer.cli import main

pytest.importorskip("scorer_loadaware", reason="contrib plugins not installed (bash scripts/test.sh installs them)")
pytest.importorskip("scorer_networktraffic", reason="contrib plugins not installed")
pytest.importorskip("scorer_networkaware", reason="contrib plugins not installed")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_demo_pods_avoid_busy_nodes(capsys, monkeypatch):
    monkeypatch.delenv("SCORER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    code, out, err = run(capsys, "simulate", "--output", "json")
    assert code == 0, err
    placements = {p["pod"]: p for p in json.loads(out)["placements"]}
    web = [placements[f"shop/web-{i}"] for i in range(4)]
    # node-a1 runs at 81% CPU, node-c1 at 93% (over the 85% threshold), node-b1 has a busy network.
    assert all(p["node"] not in ("node-a1", "node-c1", "node-b1") for p in web)
    assert all("LoadAware" in p["decidedBy"] for p in web)
    assert placements["shop/api-0"]["node"] in ("node-b1", "node-b2")  # asks for high-speed networking


def test_demo_explain_shows_metrics_and_policies(capsys, monkeypatch):
    monkeypatch.delenv("SCORER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    code, out, err = run(capsys, "explain", "--pod", "shop/web-0", "--output", "json")
    assert code == 0, err
    nodes = json.loads(out)["nodes"]
    assert nodes["node-c1"]["filter"] == {"plugin": "LoadAware", "code": "Unschedulable",
                                          "reasons": ["node(s) CPU utilization above the LoadAware threshold (85%)"]}
    stale = nodes["node-b2"]["metrics"]["network_receive_bytes_per_second"]
    assert stale["state"] == "stale" and stale["ageSeconds"] >= 900 and stale["policy"] == "neutral"
    assert nodes["node-b2"]["scores"]["NetworkTraffic"]["normalized"] == 50
    missing = nodes["gpu-1"]["metrics"]["cpu_utilization"]
    assert missing["value"] is None and missing["state"] == "missing"


def test_demo_without_contrib_plugins_says_so(capsys):
    code, out, err = run(capsys, "simulate", "--no-plugin-autoload")
    assert code == 0
    assert "the demo's metric-driven profile needs the contrib plugins LoadAware, NetworkTraffic, NetworkAware" in err
    assert "placed 8/10 pods" in out
