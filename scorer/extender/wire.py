"""The extender v1 JSON (``k8s.io/kube-scheduler/extender/v1``): requests read, results written.

kube-scheduler's extender structs have no JSON tags, so Go writes the Go field
names (``Pod``, ``Nodes``, ``NodeNames``, ``FailedNodes``, ``Host``,
``Score``) and reads keys case-insensitively. ``read_args`` does the same
(``pod`` or ``POD`` are ``Pod``); every result here is written PascalCase.
The embedded Pod and Nodes are ordinary API objects (camelCase).

``ExtenderArgs`` comes in two forms: ``Nodes`` (a NodeList of whole Node
objects; ``nodeCacheCapable: false``) or ``NodeNames`` (names only;
``nodeCacheCapable: true``: the extender knows the nodes from its own cache).
A filter result answers in the form it was asked in.

A request that cannot be read is a ``BadRequest`` naming what is wrong (the
extender answers 400 with ``Error`` set, which kube-scheduler logs).
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import orjson

from scorer.errors import InputError
from scorer.model import Pod, pod_from_dict

#: The extender's score range (kube's MaxExtenderPriority): kube multiplies a score by the extender's
#: weight and by MaxNodeScore / MaxExtenderPriority (10) and adds it to its plugins' total.
MAX_EXTENDER_PRIORITY = 10


class BadRequest(InputError):
    """An extender request that cannot be read (HTTP 400, ``Error`` says why)."""


@attrs.frozen(slots=True)
class ExtenderArgs:
    """One filter or prioritize request: the pod, the node names in request order, and, in the
    ``Nodes`` form, the Node objects as sent (``nodes`` is None in the ``NodeNames`` form)."""

    pod: Pod
    node_names: tuple[str, ...]
    nodes: tuple[Mapping[str, Any], ...] | None


def _fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object's keys folded to lower case (Go's decoder matches field names case-insensitively;
    of two keys that fold alike, the last wins, as in Go)."""
    return {str(key).lower(): value for key, value in obj.items()}


class PodCache:
    """The last pods decoded, by uid and resourceVersion: kube-scheduler sends the same pod to filter,
    then to prioritize (a pod without both is decoded every time)."""

    SIZE = 64

    def __init__(self) -> None:
        self._pods: collections.OrderedDict[tuple[str, str], Pod] = collections.OrderedDict()

    def decode(self, raw: dict[str, Any]) -> Pod:
        metadata = raw.get("metadata")
        uid = metadata.get("uid") if isinstance(metadata, dict) else None
        version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        if not (isinstance(uid, str) and uid and isinstance(version, str) and version):
            return pod_from_dict(raw, origin="the request's Pod")
        key = (uid, version)
        pod = self._pods.get(key)
        if pod is None:
            pod = self._pods[key] = pod_from_dict(raw, origin="the request's Pod")
            if len(self._pods) > self.SIZE:
                self._pods.popitem(last=False)
        return pod


def read_args(body: bytes, pods: PodCache | None = None) -> ExtenderArgs:
    """``ExtenderArgs`` from a request body; ``BadRequest`` naming the problem. With ``pods``, a pod
    seen before (same uid and resourceVersion) is not decoded again."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the request body is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise BadRequest(f"the request body must be a JSON object (ExtenderArgs), got {type(obj).__name__}")
    fields = _fields(obj)
    raw_pod = fields.get("pod")
    if not isinstance(raw_pod, dict):
        raise BadRequest("Pod: required: the pod to place (a v1 Pod object)")
    try:
        pod = pods.decode(raw_pod) if pods is not None else pod_from_dict(raw_pod, origin="the request's Pod")
    except InputError as exc:
        raise BadRequest(f"Pod: {exc}") from None
    names = fields.get("nodenames")
    node_list = fields.get("nodes")
    if names is not None:
        if not isinstance(names, list) or not set(map(type, names)) <= {str}:  # (set and map: no Python loop)
            raise BadRequest("NodeNames: must be a list of node names")
        return ExtenderArgs(pod, tuple(names), None)
    if node_list is None:
        return ExtenderArgs(pod, (), None)  # both null: no node to consider
    if not isinstance(node_list, dict):
        raise BadRequest("Nodes: must be a NodeList object ({\"items\": [...]})")
    items = _fields(node_list).get("items") or []
    if not isinstance(items, list):
        raise BadRequest("Nodes.items: must be a list of Node objects")
    node_names = []
    for i, node in enumerate(items):
        metadata = node.get("metadata") if isinstance(node, dict) else None
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if not isinstance(name, str) or not name:
            raise BadRequest(f"Nodes.items[{i}].metadata.name: required")
        node_names.append(name)
    return ExtenderArgs(pod, tuple(node_names), tuple(items))


def filter_result(args: ExtenderArgs, passed: Sequence[str], failed: Mapping[str, str],
                  unresolvable: Mapping[str, str]) -> dict[str, Any]:
    """``ExtenderFilterResult`` in the form of the request: ``NodeNames``, or ``Nodes`` holding the
    passing nodes' objects as they were sent."""
    if args.nodes is None:
        nodes: dict[str, Any] | None = None
        names: list[str] | None = list(passed)
    else:
        keep = set(passed)
        names = None
        nodes = {"metadata": {}, "items": [node for name, node in zip(args.node_names, args.nodes, strict=True)
                                           if name in keep]}
    return {"Nodes": nodes, "NodeNames": names, "FailedNodes": dict(failed),
            "FailedAndUnresolvableNodes": dict(unresolvable), "Error": ""}


def filter_error(message: str) -> dict[str, Any]:
    return {"Nodes": None, "NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": message}


class PriorityWriter:
    """``HostPriorityList`` (``[{"Host": name, "Score": score}, ...]`` in request order) as JSON bytes,
    from each name's ``{"Host":"<name>","Score":`` kept between requests (at most ``SIZE`` names) and each
    score's ``<score>}`` (0-10), joined without a Python loop in the common case."""

    SIZE = 100_000
    _ENDS = {score: b"%d}" % score for score in range(MAX_EXTENDER_PRIORITY + 1)}

    def __init__(self) -> None:
        self._prefixes: dict[str, bytes] = {}

    def write(self, names: Sequence[str], scores: Sequence[int]) -> bytes:
        if len(names) != len(scores):
            raise ValueError(f"{len(names)} names and {len(scores)} scores")
        prefixes = self._prefixes
        if len(prefixes) > self.SIZE:
            prefixes.clear()
        try:
            heads = list(map(prefixes.__getitem__, names))
        except KeyError:  # names not seen before
            heads = [prefixes.get(name) or prefixes.setdefault(name, b'{"Host":' + orjson.dumps(name) + b',"Score":')
                     for name in names]
        try:
            ends = list(map(self._ENDS.__getitem__, scores))
        except KeyError:  # (a score outside 0-10: written as it is)
            ends = [b"%d}" % int(score) for score in scores]
        return b"[" + b",".join(map(bytes.__add__, heads, ends)) + b"]"
