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

kube-scheduler writes ``NodeNames`` last (``{"Pod":...,"Nodes":null,"NodeNames":[...]}``)
and prioritizes the names the filter passed, in the filter's order: ``read_args``
finds that array's JSON at the end of the body and, when ``NodeNames`` kept the
same array (the filter's answer, or an earlier request), reads the rest of the
body only; the names are neither decoded nor checked again (``NameList``). When
that rest (the head) is also the same bytes as a request's before (the
prioritize after a filter), the body is not read at all: it is that request's
pod with the kept names (``PodCache.by_head``).

What is kept between requests is bounded whatever a client sends: the node
names (``NodeNames``: checked names and their answers' entry prefixes, at most
``NodeNames.MAX_BYTES``; the last ``NodeNames.LISTS`` arrays of names, at most
``NodeNames.LIST_BYTES``) and the decoded pods (``PodCache``: pods whose JSON is
at most ``PodCache.MAX_POD_BYTES``, the last ``PodCache.SIZE`` of them, and the
pods of the last ``PodCache.HEADS`` bodies' heads, each at most that size).
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import orjson

from scorer.errors import InputError
from scorer.inputs.describe import describe_value
from scorer.inputs.names import dns_subdomain_error
from scorer.model import Pod, pod_from_dict, pod_update_from_dict

#: The extender's score range (kube's MaxExtenderPriority): kube multiplies a score by the extender's
#: weight and by MaxNodeScore / MaxExtenderPriority (10) and adds it to its plugins' total.
MAX_EXTENDER_PRIORITY = 10
#: The longest node name (a DNS subdomain, as the API server checks Node names).
MAX_NODE_NAME = 253
_ORIGIN = "the request's Pod"


class BadRequest(InputError):
    """An extender request that cannot be read (HTTP 400, ``Error`` says why)."""


@attrs.frozen(slots=True, eq=False)
class NameList:
    """An array of node names kept by ``NodeNames`` (``source``) under its JSON: each request that sends the
    same array gets this object, its names checked once; ``ids``: their ids in ``source`` while its
    ``generation`` is this one (None: not all kept)."""

    names: tuple[str, ...]
    ids: np.ndarray | None
    source: NodeNames
    generation: int


@attrs.frozen(slots=True)
class ExtenderArgs:
    """One filter or prioritize request: the pod, the node names in request order, and, in the
    ``Nodes`` form, the Node objects as sent (``nodes`` is None in the ``NodeNames`` form). ``kept``:
    the ``NameList`` of the names, when they were read through ``NodeNames``' arrays."""

    pod: Pod
    node_names: tuple[str, ...]
    nodes: tuple[Mapping[str, Any], ...] | None
    kept: NameList | None = None


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


class HashIndex:
    """Ids by 64-bit hash in one numpy array of (hash, id) slots (open addressing, linear probing, at most an
    eighth full): ``find`` looks up a whole array of hashes at their first slots at once, and the few that
    moved on one by one. A slot is 16 bytes of one contiguous block, so a lookup reads one cache line per
    hash, where a dict lookup also reads the key's and the value's objects: with the machine's other
    processes evicting them between requests, that is most of its cost."""

    def __init__(self) -> None:
        self.slots = np.empty((0, 2), np.int64)  # (hash, id) by slot; an id of -1: an empty slot
        self.count = 0
        self.clear()

    def add(self, hash_value: int, id_: int) -> None:
        if 8 * (self.count + 1) > len(self.slots):
            self._grow()
        self._place(hash_value, id_)
        self.count += 1

    def _place(self, hash_value: int, id_: int) -> None:
        slots, mask = self.slots, len(self.slots) - 1
        slot = hash_value & mask
        while slots[slot, 1] >= 0:
            slot = (slot + 1) & mask
        slots[slot] = hash_value, id_

    def _grow(self) -> None:
        taken = self.slots[self.slots[:, 1] >= 0].tolist()
        self._empty(2 * len(self.slots))
        for hash_value, id_ in taken:
            self._place(hash_value, id_)

    def _empty(self, size: int) -> None:
        self.slots = np.zeros((size, 2), np.int64)
        self.slots[:, 1] = -1

    def clear(self) -> None:
        self._empty(64)
        self.count = 0

    def find(self, hashes: np.ndarray) -> np.ndarray:
        """The id of each hash, -1 where none is kept."""
        mask = len(self.slots) - 1
        first = hashes & mask
        pairs = self.slots.take(first, axis=0)
        found = pairs[:, 1]
        hit = pairs[:, 0] == hashes
        if hit.all():
            return found
        flat = self.slots.data.cast("B").cast("q")  # (hash, id, hash, id, ...) read as Python ints, no copy
        # (a hash whose first slot is empty is not kept: its id there is -1 already; one whose first slot holds
        # another hash is looked for in the next ones: an eighth full at most, a few)
        moved = np.flatnonzero(~hit & (found >= 0))
        for i, hash_value, slot in zip(moved.tolist(), hashes[moved].tolist(), first[moved].tolist(), strict=True):
            slot = (slot + 1) & mask
            while (id_ := flat[2 * slot + 1]) >= 0 and flat[2 * slot] != hash_value:
                slot = (slot + 1) & mask
            found[i] = id_
        return found


class NodeNames:
    """The node names of past requests, each checked once and kept with an id and the prefix of its
    ``HostPriorityList`` entry.

    kube-scheduler sends the same names in every request: ``ids`` finds a request's names among those
    kept (a dict lookup each; from ``INDEXED`` names on, by their hashes in a ``HashIndex``, where a dict's
    lookups cost twice as much once other processes have evicted the dict from the caches: Python's string
    hash is SipHash, keyed at random per process unless PYTHONHASHSEED fixes the key, so two different names
    share a 64-bit hash about once in 2**64 pairs, and a client cannot find a name with a given node's hash)
    and checks only the new ones (``node_name_error``);
    the extender maps ids to table rows with numpy (``names_by_id``, ``generation``). ``write_priorities``
    (by name) and ``write_kept`` (by id) join the kept ``{"Host":"<name>","Score":`` prefixes with each
    score's ``<score>},`` in one ``bytes.join``: no entry is made per node. Only valid names are kept,
    each counted as its length, its prefix's and ``ENTRY_BYTES`` (the Python objects, the dict and list
    slots, the hash index's), up to ``MAX_BYTES``: about 24,000 names of 60 characters. Past that
    everything kept is dropped (the ``generation`` changes) and learnt again: a client that sends endless
    new names costs time, never memory.

    Whole arrays of names are kept too (``keep_list``, ``kept_list``: a ``NameList`` by the array's JSON),
    the last ``LISTS`` of them, at most ``LIST_BYTES`` in all, each counted as its JSON and ``LIST_ENTRY_BYTES``
    per name (the name's Python object, its tuple slot, its id): kube-scheduler's filter and prioritize
    requests of one pod need two, and its filters come back to the same arrays of names: it starts each
    search of feasible nodes where the last one stopped, so the windows of its node list it sends repeat
    as the start goes round (at 500 nodes, 1,000 filters sent 400 distinct arrays; with 128 arrays kept,
    436 of them were one kept, with 256, 593: none were among the last 4).
    """

    MAX_BYTES = 16 * 1024 * 1024
    ENTRY_BYTES = 560
    #: Arrays of at least this many names are looked up in the hash index, shorter ones in the dict. Measured
    #: with the caches evicted between requests: 230 names of 500 kept (kube-scheduler's filter at 500 nodes)
    #: 0.10 ms by the dict, 0.11 by the index; 500 names of 5,000 (at 5,000 nodes) 0.26 and 0.14 ms.
    INDEXED = 256
    LISTS = 256
    LIST_BYTES = 8 * 1024 * 1024
    LIST_ENTRY_BYTES = 80
    #: The end of an entry of each score in 0-10, and the comma after it.
    _ENDS = {score: b"%d}," % score for score in range(MAX_EXTENDER_PRIORITY + 1)}

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._index = HashIndex()  # the same ids by the names' hashes
        self.names_by_id: list[str] = []
        self._prefixes: list[bytes] = []  # by id
        self.kept_bytes = 0
        self.generation = 0  # changes when everything kept is dropped (the ids with it)
        self._lists: collections.OrderedDict[bytes, NameList] = collections.OrderedDict()
        self.list_bytes = 0  # what the lists in ``_lists`` are counted as

    def check(self, names: Sequence[Any], field: str) -> tuple[str, ...]:
        """``names`` as a tuple of node names; ``BadRequest`` naming the first entry that is not a string
        or not a node name, as ``field`` with its index (``field.format(i)``: ``"NodeNames[{}]"``)."""
        self.ids(names, field)
        return tuple(names)

    def ids(self, names: Sequence[Any], field: str) -> np.ndarray | None:
        """The ids of ``names``, node names checked as ``check`` does; None when they are not all kept (more
        new names than ``MAX_BYTES`` holds)."""
        if len(names) < self.INDEXED:
            try:
                ids = np.fromiter(map(self._ids.get, names, itertools.repeat(-1)), np.int64, len(names))
            except TypeError:  # (an entry that cannot be hashed: a list, an object)
                return self._learn(names, field)
        elif set(map(type, names)) <= {str}:  # (set and map: no Python loop)
            ids = self._index.find(np.fromiter(map(hash, names), np.int64, len(names)))
        else:
            return self._learn(names, field)
        if len(ids) and ids.min() < 0:
            return self._learn(names, field)
        return ids

    def _learn(self, names: Sequence[Any], field: str) -> np.ndarray | None:
        if not set(map(type, names)) <= {str}:  # (set and map: no Python loop)
            for i, name in enumerate(names):
                if type(name) is not str:
                    raise BadRequest(f"{field.format(i)}: expected a string, got {describe_value(name)}")
        new: dict[str, bytes] = {}
        for i, name in enumerate(names):
            if name not in self._ids and name not in new:
                problem = node_name_error(name)
                if problem is not None:
                    raise BadRequest(f"{field.format(i)}: {problem}")
                new[name] = _prefix(name)
        if self.kept_bytes + self._size(new) > self.MAX_BYTES:
            self._drop_all()
            new = {name: _prefix(name) for name in names}  # (all checked: kept until now, or new)
        for name, prefix in new.items():
            size = self._size({name: prefix})
            if self.kept_bytes + size > self.MAX_BYTES:  # (more new names than fit: the first ones kept)
                return None
            self._ids[name] = len(self.names_by_id)
            self._index.add(hash(name), len(self.names_by_id))
            self.names_by_id.append(name)
            self._prefixes.append(prefix)
            self.kept_bytes += size
        return np.fromiter(map(self._ids.__getitem__, names), np.int64, len(names))

    def _size(self, new: Mapping[str, bytes]) -> int:
        return sum(map(len, new)) + sum(map(len, new.values())) + self.ENTRY_BYTES * len(new)

    def _drop_all(self) -> None:
        self._ids.clear()
        self._index.clear()
        self.names_by_id.clear()
        self._prefixes.clear()
        self._lists.clear()
        self.kept_bytes = self.list_bytes = 0
        self.generation += 1

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, name: str) -> bool:
        return name in self._ids

    def kept_list(self, raw: bytes) -> NameList | None:
        """The ``NameList`` kept under the JSON array ``raw``, None when there is none."""
        found = self._lists.get(raw)
        if found is not None:
            self._lists.move_to_end(raw)
        return found

    def keep_list(self, raw: bytes, names: tuple[str, ...], ids: np.ndarray | None) -> NameList:
        """A ``NameList`` of ``names`` and their ``ids`` (``ids``' answer, in this generation), kept under their
        JSON array ``raw`` when it fits in ``LIST_BYTES``, the least recently used lists dropped to make room."""
        name_list = NameList(names, ids, self, self.generation)
        if self._list_size(raw, name_list) > self.LIST_BYTES:
            return name_list
        previous = self._lists.pop(raw, None)
        if previous is not None:
            self.list_bytes -= self._list_size(raw, previous)
        self._lists[raw] = name_list
        self.list_bytes += self._list_size(raw, name_list)
        while self.list_bytes > self.LIST_BYTES or len(self._lists) > self.LISTS:
            dropped, dropped_list = self._lists.popitem(last=False)
            self.list_bytes -= self._list_size(dropped, dropped_list)
        return name_list

    def keep_decoded(self, raw: bytes, listed: list[Any]) -> NameList:
        """``keep_list`` of a request's ``NodeNames`` array ``listed``, decoded from its JSON ``raw``: its names
        checked (``BadRequest`` naming the first bad one) and their ids."""
        return self.keep_list(raw, tuple(listed), self.ids(listed, "NodeNames[{}]"))

    def _list_size(self, raw: bytes, name_list: NameList) -> int:
        return len(raw) + self.LIST_ENTRY_BYTES * len(name_list.names)

    def current_ids(self, kept: NameList | None) -> np.ndarray | None:
        """The ids of ``kept``'s names when they are ids of this object in this generation, else None."""
        if kept is None or kept.source is not self or kept.generation != self.generation:
            return None
        return kept.ids

    def write_kept(self, args: ExtenderArgs, scores: Sequence[int]) -> bytes:
        """``args``' ``HostPriorityList`` with ``scores`` as JSON bytes: from the prefixes of its names' ids when
        it has them (``args.kept``, in this generation), else as ``write_priorities`` writes it."""
        ids = self.current_ids(args.kept)
        if ids is None or len(ids) != len(scores):
            return self.write_priorities(args.node_names, scores)
        return self._join(list(map(self._prefixes.__getitem__, ids.tolist())), scores)

    def write_priorities(self, names: Sequence[str], scores: Sequence[int]) -> bytes:
        """``HostPriorityList`` (``[{"Host": name, "Score": score}, ...]`` in request order) as JSON bytes."""
        if len(names) != len(scores):
            raise ValueError(f"{len(names)} names and {len(scores)} scores")
        ids, prefixes = self._ids, self._prefixes
        return self._join([prefixes[i] if (i := ids.get(name)) is not None else _prefix(name) for name in names],
                          scores)

    def _join(self, prefixes: list[bytes], scores: Sequence[int]) -> bytes:
        """The entries of ``prefixes`` (``{"Host":"<name>","Score":``) and ``scores``, as many, as a JSON array:
        prefixes and ends interleaved in one list (slices: no Python loop), joined once."""
        if not prefixes:
            return b"[]"
        parts: list[bytes] = [b""] * (2 * len(prefixes))
        parts[0::2] = prefixes
        try:
            parts[1::2] = map(self._ENDS.__getitem__, scores)
        except KeyError:  # (a score outside 0-10: written as it is)
            parts[1::2] = [b"%d}," % int(score) for score in scores]
        return b"[" + b"".join(parts)[:-1] + b"]"


class PodCache:
    """The last pods decoded, by their JSON: kube-scheduler sends the same pod to filter, then to
    prioritize. A pod is kept only when its JSON (as ``orjson`` writes it again) is at most
    ``MAX_POD_BYTES``, the last ``SIZE`` of them: at most a few MiB; a larger pod is decoded every time.
    Keyed by the whole JSON, not by uid and resourceVersion: a request that reuses a pod's uid and version
    with other content is decoded (and refused, if it must be) as it is.

    ``watched`` gives the pod the service's watch holds under a ``namespace/name`` key (None: none):
    kube-scheduler sends a pod its own watch has just seen, so scorer's watch has decoded it too. A pod
    not kept here is then built from the watch's where the two differ only in what a binding changes
    (``pod_update_from_dict``: the node name, the status, the resourceVersion; the rest compared by its
    digest), which is the pod ``pod_from_dict`` would decode; else it is decoded.

    ``by_json`` gives the pod the watch decoded from the very bytes of a request's Pod (None: none;
    ``Reflector.by_json``): kube-scheduler writes the API server's JSON of the pod byte for byte (as it
    had it from its own watch: checked with kube-scheduler 1.20.2), so ``read_args`` takes that pod
    without parsing the request's head at all (``by_bytes``)."""

    SIZE = 16
    MAX_POD_BYTES = 64 * 1024
    #: Request heads kept (``by_head``): kube-scheduler's filter and prioritize of one pod share one.
    HEADS = 2

    def __init__(self, watched: Callable[[str], Pod | None] | None = None,
                 by_json: Callable[[bytes], Pod | None] | None = None) -> None:
        self._pods: collections.OrderedDict[bytes, Pod] = collections.OrderedDict()
        self._heads: collections.OrderedDict[bytes, Pod] = collections.OrderedDict()
        self._watched = watched
        self._by_json = by_json
        self.on_by_json: Callable[[], object] = lambda: None  # told each pod found by its bytes (``by_bytes``)

    def by_bytes(self, head: bytes) -> Pod | None:
        """The pod of a request whose body without its ``NodeNames`` member is ``head``, when ``head`` is
        ``{"Pod":<JSON>,"Nodes":null}`` (kube-scheduler's names-only form) and the watch decoded a pod from
        exactly that JSON; None otherwise."""
        if self._by_json is None or not head.startswith(_POD_HEAD) or not head.endswith(_NULL_NODES_END):
            return None
        pod = self._by_json(head[len(_POD_HEAD):-len(_NULL_NODES_END)])
        if pod is not None:
            self.on_by_json()
        return pod

    def by_head(self, head: bytes) -> Pod | None:
        """The pod of a request whose body without its ``NodeNames`` member was ``head`` (``keep_head``),
        None when none is kept: the same bytes decode to the same pod, so they are not decoded again."""
        return self._heads.get(head)

    def keep_head(self, head: bytes, pod: Pod) -> None:
        """Keep ``pod`` as the pod of ``head`` (a request's body without its ``NodeNames`` member, read
        whole): the last ``HEADS`` of them, each at most ``MAX_POD_BYTES``."""
        if len(head) <= self.MAX_POD_BYTES:
            self._heads[head] = pod
            self._heads.move_to_end(head)
            if len(self._heads) > self.HEADS:
                self._heads.popitem(last=False)

    def decode(self, raw: Mapping[str, Any]) -> Pod:
        try:
            key = orjson.dumps(raw)
        except orjson.JSONEncodeError:  # (nested deeper than orjson writes: not kept)
            return pod_from_dict(raw, origin=_ORIGIN)
        if len(key) > self.MAX_POD_BYTES:
            return pod_from_dict(raw, origin=_ORIGIN)
        pod = self._pods.get(key)
        if pod is None:
            pod = self._from_watch(raw)
            if pod is None:
                pod = pod_from_dict(raw, origin=_ORIGIN)
            self._pods[key] = pod
            if len(self._pods) > self.SIZE:
                self._pods.popitem(last=False)
        return pod

    def _from_watch(self, raw: Mapping[str, Any]) -> Pod | None:
        """``raw`` built from the watch's pod of its name, None when it cannot be. Only a plain v1 Pod
        (no other ``kind`` or ``apiVersion``: ``pod_from_dict`` names what is wrong with those)."""
        if self._watched is None or raw.get("kind", "Pod") != "Pod" or raw.get("apiVersion", "v1") != "v1":
            return None
        meta = raw.get("metadata")
        if not isinstance(meta, dict):
            return None
        name, namespace = meta.get("name"), meta.get("namespace", "")
        if not isinstance(name, str) or not name or not isinstance(namespace, str):
            return None
        watched = self._watched(f"{namespace or 'default'}/{name}")
        return pod_update_from_dict(watched, raw) if watched is not None else None

    def __len__(self) -> int:
        return len(self._pods)


#: The last member of a body as kube-scheduler writes it, up to its array: ``...,"NodeNames":[...]}``.
_LAST_NAMES = b',"NodeNames":['
#: A names-only body's head (``_split_names``) as kube-scheduler writes it: ``{"Pod":<JSON>,"Nodes":null}``.
_POD_HEAD = b'{"Pod":'
_NULL_NODES_END = b',"Nodes":null}'


def _split_names(body: bytes | bytearray) -> tuple[bytes, bytes] | None:
    """(the body without its last member, that member's array) when the body ends with a ``NodeNames``
    array, as kube-scheduler writes it; None otherwise.

    Only a key can hold ``,"NodeNames":[`` (inside a JSON string the quotes are escaped), so its last
    occurrence is the last ``NodeNames`` key; when the body without that member parses as an object, the
    key is the top-level object's, and when the rest is a whole JSON array, that array is its value and
    the object's last member (the one that counts, of keys that fold alike)."""
    if not body.endswith(b"]}"):
        body = body.rstrip()  # (JSON may end with white space: an encoder's newline)
        if not body.endswith(b"]}"):
            return None
    at = body.rfind(_LAST_NAMES)
    if at < 0:
        return None
    return bytes(body[:at]) + b"}", bytes(body[at + len(_LAST_NAMES) - 1:-1])


def _load(body: bytes | bytearray, names: NodeNames | None, split: tuple[bytes, bytes] | None
          ) -> tuple[Any, NameList | None, list[Any] | None, bytes]:
    """The body's JSON value; with ``names`` and a body that ends with its ``NodeNames`` array (``split``:
    ``_split_names``), the object without that member, and the array as ``names`` kept it (a ``NameList``)
    or decoded, and its JSON."""
    if split is not None and names is not None:
        head, raw = split
        kept = names.kept_list(raw)
        try:
            listed = None if kept is not None else orjson.loads(raw)
            obj = orjson.loads(head)
        except orjson.JSONDecodeError:
            pass  # (not the array and the object they seemed to be: the whole body is read, or refused)
        else:
            if isinstance(obj, dict) and (kept is not None or isinstance(listed, list)):
                return obj, kept, listed, raw
    try:
        return orjson.loads(body), None, None, b""
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the request body is not JSON: {exc}") from None


def _with_names(pod: Pod, raw: bytes, names: NodeNames) -> ExtenderArgs | None:
    """``pod`` with the names of the JSON array ``raw`` (the body's last member), kept or decoded and checked
    (``BadRequest`` naming a bad one); None when ``raw`` is not an array (the whole body is then read)."""
    kept = names.kept_list(raw)
    if kept is None:
        try:
            listed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(listed, list):
            return None
        kept = names.keep_decoded(raw, listed)
    return ExtenderArgs(pod, kept.names, None, kept)


def read_args(body: bytes | bytearray, pods: PodCache | None = None, names: NodeNames | None = None) -> ExtenderArgs:
    """``ExtenderArgs`` from a request body; ``BadRequest`` naming the problem. With ``pods``, a pod
    seen before is not decoded again; with ``names``, node names seen before are not checked again, nor
    decoded when the same array of them was (``NodeNames.keep_list``); with both, a body that is another's
    with the same kept names (kube-scheduler's prioritize after its filter) is not read again
    (``PodCache.by_head``), and one whose Pod is byte for byte the JSON the watch decoded a pod from
    (kube-scheduler's filter) reads its names only (``PodCache.by_bytes``)."""
    split = _split_names(body) if names is not None else None
    if split is not None and pods is not None and names is not None:
        pod = pods.by_head(split[0]) or pods.by_bytes(split[0])
        if pod is not None:
            args = _with_names(pod, split[1], names)
            if args is not None:
                pods.keep_head(split[0], pod)
                return args
    obj, kept, decoded, raw = _load(body, names, split)
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
    if raw and pods is not None:  # (the body was read as its head and its names)
        assert split is not None
        pods.keep_head(split[0], pod)
    if kept is not None:
        return ExtenderArgs(pod, kept.names, None, kept)
    if decoded is not None:
        assert names is not None
        kept = names.keep_decoded(raw, decoded)
        return ExtenderArgs(pod, kept.names, None, kept)
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
