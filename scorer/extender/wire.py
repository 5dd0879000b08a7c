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

A request that cannot be read is a ``BadRequest`` naming the field and what
is wrong (the extender answers 400 with ``Error`` set, which kube-scheduler
logs): a value of the wrong JSON type (``NodeNames[2]: expected a string, got
integer 7``; the Pod's fields as ``pod_from_dict`` names them), a node name
that is not one (a DNS subdomain of at most 253 characters, as the API server
requires: ``NodeNames[3]: "Node_1": a lowercase RFC 1123 subdomain ...``).

What is kept between requests is bounded whatever a client sends: the node
names (``NodeNames``: checked names and their answer prefixes, at most
``NodeNames.MAX_BYTES``) and the decoded pods (``PodCache``: pods whose JSON
is at most ``PodCache.MAX_POD_BYTES``, the last ``PodCache.SIZE`` of them).
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import orjson

from scorer.errors import InputError
from scorer.inputs.describe import describe_value
from scorer.inputs.names import dns_subdomain_error
from scorer.model import Pod, pod_from_dict

#: The extender's score range (kube's MaxExtenderPriority): kube multiplies a score by the extender's
#: weight and by MaxNodeScore / MaxExtenderPriority (10) and adds it to its plugins' total.
MAX_EXTENDER_PRIORITY = 10
#: The longest node name (a DNS subdomain, as the API server checks Node names).
MAX_NODE_NAME = 253
_ORIGIN = "the request's Pod"


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


def node_name_error(name: str) -> str | None:
    """Why ``name`` is not a node name (a DNS subdomain of at most 253 characters, with
    k8s.io/apimachinery's wording); None when it is one."""
    if not name:
        return "required: a node name"
    return dns_subdomain_error(name)


def _prefix(name: str) -> bytes:
    """``{"Host":"<name>","Score":`` of ``name``'s entry in a ``HostPriorityList``."""
    return b'{"Host":' + orjson.dumps(name) + b',"Score":'


class NodeNames:
    """The node names of past requests, each checked once and kept with its ``HostPriorityList`` prefix.

    kube-scheduler sends the same names in every request: ``check`` finds a request's names among
    those kept (one dict lookup each, no Python loop) and checks only the new ones (``node_name_error``);
    ``write_priorities`` joins the kept ``{"Host":"<name>","Score":`` prefixes with each score's
    ``<score>}``. Only valid names are kept, each counted as its length, its prefix's and ``ENTRY_BYTES``
    (the Python objects and the dict slot), up to ``MAX_BYTES``: about 24,000 names of 60 characters.
    Past that everything kept is dropped and learnt again, so a client that sends endless new names costs
    time, never memory.
    """

    MAX_BYTES = 8 * 1024 * 1024
    ENTRY_BYTES = 200
    _ENDS = {score: b"%d}" % score for score in range(MAX_EXTENDER_PRIORITY + 1)}

    def __init__(self) -> None:
        self._prefixes: dict[str, bytes] = {}
        self.kept_bytes = 0

    def check(self, names: Sequence[Any], field: str) -> tuple[str, ...]:
        """``names`` as a tuple of node names; ``BadRequest`` naming the first entry that is not a string
        or not a node name, as ``field`` with its index (``field.format(i)``: ``"NodeNames[{}]"``)."""
        if not set(map(type, names)) <= {str}:  # (set and map: no Python loop)
            for i, name in enumerate(names):
                if type(name) is not str:
                    raise BadRequest(f"{field.format(i)}: expected a string, got {describe_value(name)}")
        prefixes = self._prefixes
        if not all(map(prefixes.__contains__, names)):
            for i, name in enumerate(names):
                if name not in prefixes:
                    problem = node_name_error(name)
                    if problem is not None:
                        raise BadRequest(f"{field.format(i)}: {problem}")
                    self._keep(name)
        return tuple(names)

    def _keep(self, name: str) -> bytes:
        prefix = _prefix(name)
        size = len(name) + len(prefix) + self.ENTRY_BYTES
        if self.kept_bytes + size > self.MAX_BYTES:
            self._prefixes.clear()
            self.kept_bytes = 0
        self._prefixes[name] = prefix
        self.kept_bytes += size
        return prefix

    def __len__(self) -> int:
        return len(self._prefixes)

    def write_priorities(self, names: Sequence[str], scores: Sequence[int]) -> bytes:
        """``HostPriorityList`` (``[{"Host": name, "Score": score}, ...]`` in request order) as JSON bytes."""
        if len(names) != len(scores):
            raise ValueError(f"{len(names)} names and {len(scores)} scores")
        prefixes = self._prefixes
        try:
            heads = list(map(prefixes.__getitem__, names))
        except KeyError:  # names not kept (dropped since ``check``, or never checked): written, not kept
            heads = [prefixes.get(name) or _prefix(name) for name in names]
        try:
            ends = list(map(self._ENDS.__getitem__, scores))
        except KeyError:  # (a score outside 0-10: written as it is)
            ends = [b"%d}" % int(score) for score in scores]
        return b"[" + b",".join(map(bytes.__add__, heads, ends)) + b"]"


class PodCache:
    """The last pods decoded, by their JSON: kube-scheduler sends the same pod to filter, then to
    prioritize. A pod is kept only when its JSON (as ``orjson`` writes it again) is at most
    ``MAX_POD_BYTES``, the last ``SIZE`` of them: at most a few MiB; a larger pod is decoded every time.
    Keyed by the whole JSON, not by uid and resourceVersion: a request that reuses a pod's uid and version
    with other content is decoded (and refused, if it must be) as it is."""

    SIZE = 16
    MAX_POD_BYTES = 64 * 1024

    def __init__(self) -> None:
        self._pods: collections.OrderedDict[bytes, Pod] = collections.OrderedDict()

    def decode(self, raw: Mapping[str, Any]) -> Pod:
        try:
            key = orjson.dumps(raw)
        except orjson.JSONEncodeError:  # (nested deeper than orjson writes: not kept)
            return pod_from_dict(raw, origin=_ORIGIN)
        if len(key) > self.MAX_POD_BYTES:
            return pod_from_dict(raw, origin=_ORIGIN)
        pod = self._pods.get(key)
        if pod is None:
            pod = self._pods[key] = pod_from_dict(raw, origin=_ORIGIN)
            if len(self._pods) > self.SIZE:
                self._pods.popitem(last=False)
        return pod

    def __len__(self) -> int:
        return len(self._pods)


def read_args(body: bytes | bytearray, pods: PodCache | None = None, names: NodeNames | None = None) -> ExtenderArgs:
    """``ExtenderArgs`` from a request body; ``BadRequest`` naming the problem. With ``pods``, a pod
    seen before is not decoded again; with ``names``, node names seen before are not checked again."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the request body is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise BadRequest(f"the request body must be a JSON object (ExtenderArgs), got {describe_value(obj)}")
    fields = _fields(obj)
    raw_pod = fields.get("pod")
    if raw_pod is None:
        raise BadRequest("Pod: required: the pod to place (a v1 Pod object)")
    if not isinstance(raw_pod, dict):
        raise BadRequest(f"Pod: expected an object (a v1 Pod), got {describe_value(raw_pod)}")
    try:
        pod = pods.decode(raw_pod) if pods is not None else pod_from_dict(raw_pod, origin=_ORIGIN)
    except InputError as exc:
        raise BadRequest(str(exc)) from None  # (names the Pod and the field: "Pod ns/name (...): spec: ...")
    checked = names if names is not None else NodeNames()
    node_names = fields.get("nodenames")
    node_list = fields.get("nodes")
    if node_names is not None:
        if not isinstance(node_names, list):
            raise BadRequest(f"NodeNames: expected a list of node names, got {describe_value(node_names)}")
        return ExtenderArgs(pod, checked.check(node_names, "NodeNames[{}]"), None)
    if node_list is None:
        return ExtenderArgs(pod, (), None)  # both null: no node to consider
    if not isinstance(node_list, dict):
        raise BadRequest(f"Nodes: expected a NodeList object ({{\"items\": [...]}}), got {describe_value(node_list)}")
    items = _fields(node_list).get("items")
    if items is None:
        items = []
    if not isinstance(items, list):
        raise BadRequest(f"Nodes.items: expected a list of Node objects, got {describe_value(items)}")
    listed = []
    for i, node in enumerate(items):
        if not isinstance(node, dict):
            raise BadRequest(f"Nodes.items[{i}]: expected a Node object, got {describe_value(node)}")
        metadata = node.get("metadata")
        if not isinstance(metadata, dict):
            raise BadRequest(f"Nodes.items[{i}].metadata: required: an object with the node's name")
        name = metadata.get("name")
        if name is None:
            raise BadRequest(f"Nodes.items[{i}].metadata.name: required")
        listed.append(name)
    return ExtenderArgs(pod, checked.check(listed, "Nodes.items[{}].metadata.name"), tuple(items))


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
