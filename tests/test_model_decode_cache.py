"""The caches of decoded resource maps and toleration lists (``scorer.model.decode_fields``):
an object decoded after one with equal but differently typed values (1, 1.0, True) gets the result,
or the error, of its own values; the maps handed out are the caller's to change; the caches stay
bounded."""

from __future__ import annotations

from typing import Any

import pytest
from modelkit import node_dict, pod_dict

from scorer.errors import ModelError
from scorer.model import decode as decode_module
from scorer.model import decode_fields, node_from_dict, pod_from_dict


def node_with_pods(pods: Any) -> dict[str, Any]:
    return node_dict(capacity={"cpu": "4", "pods": pods})


def test_a_resource_map_of_equal_values_of_another_type_is_decoded_on_its_own() -> None:
    assert node_from_dict(node_with_pods(1)).capacity["pods"] == 1
    assert node_from_dict(node_with_pods(1.5)).capacity["pods"] == 2
    with pytest.raises(ModelError, match=r"status\.capacity\.pods: invalid quantity boolean true"):
        node_from_dict(node_with_pods(True))
    assert node_from_dict(node_with_pods(1.0)).capacity["pods"] == 1
    with pytest.raises(ModelError, match=r"status\.capacity\.pods: invalid quantity"):
        node_from_dict(node_with_pods([1]))


def test_decoded_resource_maps_are_the_callers_to_change() -> None:
    first = node_from_dict(node_dict())
    first.capacity["cpu"] = 1
    first.allocatable.clear()
    second = node_from_dict(node_dict())
    assert second.capacity["cpu"] == 4000
    assert second.allocatable == second.capacity
    limits_only = [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]
    pod = pod_from_dict(pod_dict(containers=limits_only))
    assert pod.containers[0].requests == pod.containers[0].limits == {"cpu": 1000}
    pod.containers[0].requests["memory"] = 1  # the request defaulted from the limit is a dict of its own
    assert pod_from_dict(pod_dict(containers=limits_only)).containers[0].limits == {"cpu": 1000}


def tolerations(seconds: Any) -> list[dict[str, Any]]:
    return [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": seconds}]


def test_a_toleration_list_of_equal_values_of_another_type_is_decoded_on_its_own() -> None:
    pod = pod_from_dict(pod_dict(tolerations=tolerations(1)))
    assert pod.tolerations[0].toleration_seconds == 1
    assert pod_from_dict(pod_dict(tolerations=tolerations(1))).tolerations == pod.tolerations
    for seconds in (True, 1.0):
        with pytest.raises(ModelError, match=r"spec\.tolerations\[0\]\.tolerationSeconds: expected an integer"):
            pod_from_dict(pod_dict(tolerations=tolerations(seconds)))


def test_the_caches_stay_bounded() -> None:
    for i in range(decode_fields.DECODED_CACHE_SIZE + 10):
        node_from_dict(node_dict(capacity={"cpu": str(i)}))
        pod_from_dict(pod_dict(tolerations=tolerations(i)))
    assert 0 < len(decode_fields._RESOURCE_MAPS) <= decode_fields.DECODED_CACHE_SIZE
    assert 0 < len(decode_module._TOLERATIONS) <= decode_fields.DECODED_CACHE_SIZE
