"""Printing: the effective v1 configuration and the resolved plugin lists; validate_file."""

from __future__ import annotations

import textwrap

import pytest
import yaml
from test_config_catalog import full_catalog, make_catalog

from scorer.config import (
    V1BETA1,
    describe_resolved,
    effective_config,
    load_config,
    load_config_text,
    resolve_config,
    validate_file,
)
from scorer.errors import ConfigError

CATALOG = make_catalog()

V1_FILE = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
parallelism: 8
leaderElection:
  leaderElect: false
  leaseDuration: 1m30s
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
  qps: 20.5
percentageOfNodesToScore: 50
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: NetworkTraffic
        weight: 5
      - name: TaintToleration
        weight: 1
    score:
      disabled:
      - name: NodeResourcesFit
  pluginConfig:
  - name: NetworkTraffic
    args:
      ip: http://prometheus:9090
      timeRange: 30
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
- schedulerName: no-scoring
  percentageOfNodesToScore: 10
  plugins:
    score:
      disabled:
      - name: "*"
extenders:
- urlPrefix: http://127.0.0.1:8888/
  prioritizeVerb: prioritize
  weight: 2
  httpTimeout: 500ms
  tlsConfig:
    caData: Y2E=
"""


def test_effective_config_of_the_defaults():
    out = effective_config(load_config(None, CATALOG))
    assert list(out) == [
        "apiVersion",
        "kind",
        "parallelism",
        "leaderElection",
        "clientConnection",
        "enableProfiling",
        "enableContentionProfiling",
        "percentageOfNodesToScore",
        "podInitialBackoffSeconds",
        "podMaxBackoffSeconds",
        "profiles",
        "extenders",
        "delayCacheUntilActive",
    ]
    assert out["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert out["leaderElection"] == {
        "leaderElect": True,
        "leaseDuration": "15s",
        "renewDeadline": "10s",
        "retryPeriod": "2s",
        "resourceLock": "leases",
        "resourceName": "kube-scheduler",
        "resourceNamespace": "kube-system",
    }
    (profile,) = out["profiles"]
    assert list(profile["plugins"]) == ["multiPoint"]
    assert profile["plugins"]["multiPoint"]["enabled"][4] == {
        "name": "TaintToleration",
        "weight": 3,
    }
    assert profile["pluginConfig"] == [
        {
            "name": "NodeResourcesFit",
            "args": {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "NodeResourcesFitArgs",
                "scoringStrategy": {
                    "type": "LeastAllocated",
                    "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
                },
            },
        }
    ]


def test_effective_config_round_trips():
    # Every default plugin must be installed: written out explicitly, a plugin scorer lacks
    # is the user's and so an error (test_config_load.test_user_plugin_names).
    catalog = full_catalog()
    config = load_config_text(V1_FILE, catalog)
    out = effective_config(config, resolve_config(config, catalog))
    text = yaml.safe_dump(out, sort_keys=False)
    again = load_config_text(text, catalog)
    assert again == config
    assert effective_config(again) == out
    assert out["extenders"] == [
        {
            "urlPrefix": "http://127.0.0.1:8888/",
            "filterVerb": "",
            "preemptVerb": "",
            "prioritizeVerb": "prioritize",
            "weight": 2,
            "bindVerb": "",
            "enableHTTPS": False,
            "tlsConfig": {
                "insecure": False,
                "serverName": "",
                "certFile": "",
                "keyFile": "",
                "caFile": "",
                "certData": "",
                "keyData": "",
                "caData": "Y2E=",
            },
            "httpTimeout": "500ms",
            "nodeCacheCapable": False,
            "managedResources": [],
            "ignorable": False,
        }
    ]
    assert out["profiles"][1] == {
        "schedulerName": "no-scoring",
        "percentageOfNodesToScore": 10,
        "plugins": {
            "score": {"disabled": [{"name": "*"}]},
            "multiPoint": out["profiles"][1]["plugins"]["multiPoint"],
        },
        "pluginConfig": out["profiles"][1]["pluginConfig"],
    }


def test_v1beta1_seed_renders_in_v1_shape():
    seed = textwrap.dedent(
        """\
        apiVersion: kubescheduler.config.k8s.io/v1beta1
        kind: KubeSchedulerConfiguration
        profiles:
        - schedulerName: custom-scheduler
          plugins:
            score:
              enabled:
              - name: NodeResourcesMostAllocated
                weight: 3
          pluginConfig:
          - name: NodeResourcesMostAllocated
            args:
              resources: [{name: cpu, weight: 2}]
        """
    )
    config = load_config_text(seed, CATALOG)
    assert config.api_version == V1BETA1
    out = effective_config(config)
    assert out["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    profile = out["profiles"][0]
    assert "multiPoint" not in profile["plugins"]
    assert profile["plugins"]["score"]["enabled"][-1] == {"name": "NodeResourcesFit", "weight": 3}
    assert profile["pluginConfig"] == [
        {
            "name": "NodeResourcesFit",
            "args": {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "NodeResourcesFitArgs",
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "resources": [{"name": "cpu", "weight": 2}],
                },
            },
        }
    ]


def test_describe_resolved():
    config = load_config_text(V1_FILE, CATALOG)
    resolved = resolve_config(config, CATALOG)
    text = describe_resolved(resolved, ["a config warning"])
    lines = text.splitlines()
    assert lines[:2] == ["warnings:", "  - a config warning"]
    assert lines[2] == 'profile "default-scheduler" (percentageOfNodesToScore: global)'
    assert "  queueSort:  PrioritySort" in lines
    assert "  filter:     NodeUnschedulable, NodeName, TaintToleration, NodeResourcesFit" in lines
    assert "  score:      TaintToleration (weight 1), NetworkTraffic (weight 5)" in lines
    assert "  max total score per node: 600" in lines
    assert "  permit:     -" in lines
    assert 'profile "no-scoring" (percentageOfNodesToScore: 10%)' in lines
    assert (
        '  warning: default plugin "ImageLocality" is not implemented by scorer yet; skipped'
        in lines
    )
    assert text.endswith("\n")
    assert describe_resolved(resolved[1]).startswith('profile "no-scoring"')


def test_validate_file(tmp_path):
    path = tmp_path / "scheduler.yaml"
    path.write_text(V1_FILE)
    config, resolved = validate_file(path, CATALOG)
    assert config.source == str(path)
    assert [r.scheduler_name for r in resolved] == ["default-scheduler", "no-scoring"]
    path.write_text(
        V1_FILE.replace("- name: NetworkTraffic\n        weight: 5", "- name: NetworkTrafic")
    )
    with pytest.raises(ConfigError) as info:
        validate_file(path, CATALOG)
    assert str(info.value).startswith(
        f'{path}: profiles[0].plugins.multiPoint.enabled[0].name: unknown plugin "NetworkTrafic"'
    )
    path.write_text(
        V1_FILE.replace(
            "    score:\n      disabled:\n      - name: NodeResourcesFit",
            "    filter:\n      enabled:\n      - name: NetworkTraffic",
        )
    )
    with pytest.raises(ConfigError) as info:
        validate_file(path, CATALOG)
    assert info.value.errors == [
        (
            "profiles[0].plugins.filter.enabled[0].name",
            'plugin "NetworkTraffic" does not implement filter (it implements: score)',
        )
    ]
    assert info.value.source == str(path)
