"""The first lists of ``scorer run``'s reflectors, asked for while its modules load (``start``).

A scheduler places nothing before it has listed nodes and pods (and the rest it reads). kube-apiserver
takes about 0.1 s (500 nodes, 3,000 pods) to 0.7 s (15,000 nodes) to encode those lists on a busy 2-core
machine, and scorer's modules take about 0.3 s of CPU to load. So ``scorer/__main__.py`` sends these
requests first, on threads with the standard library's HTTP client (nodes and pods each on its own, the
small lists in turn on a third: as many TLS handshakes as lists, when the reflectors start, cost more
than the lists), and the server encodes while Python imports; the threads keep what arrives. The
reflectors' first lists then read those answers (``ApiClient(early=...)``, ``EarlyLists.take``) as they
arrive, as they would read their own. For a resource served under one of several group versions
(PodDisruptionBudgets, CSIStorageCapacities), each version's discovery document and list are asked for:
the reflector reads the documents (``ApiClient.request``) to choose, takes the list it chooses, and the
others are dropped.

Only what the service would ask itself is taken: the same API access (``AccessChoice``: the same
kubeconfig and context, or in cluster; the service takes the access loaded here rather than loading it
again), the same path and query (a first list from the watch cache, ``list_params``) and the same user
agent. The kubeconfig is ``--kubeconfig``, else the configuration file's ``clientConnection.kubeconfig``
(``--config``, read here for that field alone; kubeadm-style set-ups name it there), else what the
service would choose. Anything else and the answers are dropped unread (``discard``): a configuration
read otherwise by the service, a reflector with another page size. Each answer is taken once. A request that failed
before its answer's head is not retried here: the reflector asks again, as it would have. A failure
while the body arrives is the reflector's, as with its own request (it lists again).

Nothing is started for another command, for ``--help``, or when the access cannot be loaded (the
service then reports that itself).
"""

from __future__ import annotations

import http.client
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence

import attrs

from scorer import __version__
from scorer.errors import InputError
from scorer.inputs.reader import CONFIG_LIMITS, read_documents, single_document
from scorer.kube.config import AccessChoice, ClusterAccess, choose_access
from scorer.kube.listing import DEFAULT_PAGE_SIZE, list_params

USER_AGENT = f"scorer/{__version__}"  # every request of scorer run's API clients
# The first lists asked for early, on three threads: the two large ones each on its own, then the rest in
# turn on one connection (small in most clusters: they would cost as many TLS handshakes as lists when the
# reflectors start).
NODE_LISTS = ("/api/v1/nodes",)
POD_LISTS = ("/api/v1/pods",)
OTHER_LISTS = ("/api/v1/namespaces", "/api/v1/services", "/api/v1/replicationcontrollers",
               "/apis/apps/v1/replicasets", "/apis/apps/v1/statefulsets", "/apis/storage.k8s.io/v1/storageclasses",
               "/apis/storage.k8s.io/v1/csidrivers", "/apis/storage.k8s.io/v1/csinodes",
               "/api/v1/persistentvolumes", "/api/v1/persistentvolumeclaims")
FIRST_LISTS = (*NODE_LISTS, *POD_LISTS, *OTHER_LISTS)
# The resources served under one of several group versions (``apiresources``' fallback paths), in the
# reflectors' order: for each version, its discovery document (which the reflector reads to choose) and the
# list at that path (the one chosen is taken, the others dropped). After the rest, on their connection.
VERSIONED = (("/apis/policy/v1", "/apis/policy/v1/poddisruptionbudgets"),
             ("/apis/policy/v1beta1", "/apis/policy/v1beta1/poddisruptionbudgets"),
             ("/apis/storage.k8s.io/v1", "/apis/storage.k8s.io/v1/csistoragecapacities"),
             ("/apis/storage.k8s.io/v1beta1", "/apis/storage.k8s.io/v1beta1/csistoragecapacities"),
             ("/apis/storage.k8s.io/v1alpha1", "/apis/storage.k8s.io/v1alpha1/csistoragecapacities"))
DISCOVERY = tuple(discovery for discovery, _ in VERSIONED)
READ_SIZE = 1 << 20  # bytes asked of the socket at a time
EARLY_TIMEOUT = 30.0  # seconds of silence (connecting, then between two reads); the client's own timeout


class EarlyListError(Exception):
    """The early request failed (its transport, after the head)."""


class EarlyAnswer:
    """One request, sent on a thread (``fetch``): its status and headers, then its body in chunks, polled from
    the event loop (``head``, ``chunks``; ``wake_after`` asks to be told of what the thread does next:
    ``scorer.kube.client``'s ``EarlyApiStream`` waits so). This module imports no asyncio: the requests
    leave before it loads."""

    def __init__(self, path: str, params: Mapping[str, str]) -> None:
        self.path = path
        self.params = dict(params)
        self.started = time.perf_counter()
        self.status = 0
        self.headers: dict[str, str] = {}
        self._lock = threading.Lock()
        self._chunks: list[bytes] = []
        self._head = False  # the status and headers are in
        self._done = False  # the body is all in, or the request failed
        self._error: BaseException | None = None
        self._dropped = False
        self._version = 0  # publications so far
        self._wake: Callable[[], None] | None = None  # called (on the thread) at the next publication

    # --- the thread
    def receive(self, connection: http.client.HTTPConnection, access: ClusterAccess, base: str) -> None:
        """Send the request on ``connection`` and take its answer in (raises what the transport raises)."""
        self.started = time.perf_counter()
        query = "?" + urllib.parse.urlencode(self.params) if self.params else ""
        connection.request("GET", base + self.path + query,
                           headers={**access.headers(), "Accept": "application/json", "User-Agent": USER_AGENT})
        response = connection.getresponse()
        self._publish(head=(response.status, dict(response.getheaders())))
        while chunk := response.read1(READ_SIZE):
            if self._dropped:
                raise EarlyListError("dropped")  # (the connection goes: the rest of the body is not read)
            self._publish(chunk=chunk)
        # A body of known length read to its end leaves the answer open (http.client closes it only at the end
        # of a chunked body), and the connection's next request would find no answer: done with it.
        response.close()
        self._publish(done=True)

    def fail(self, error: BaseException) -> None:
        """The request failed (before its answer's head, or while its body arrived)."""
        self._publish(error=error)

    def _publish(self, *, head: tuple[int, dict[str, str]] | None = None, chunk: bytes = b"",
                 done: bool = False, error: BaseException | None = None) -> None:
        with self._lock:
            if head is not None:
                self.status, self.headers = head
                self._head = True
            if chunk and not self._dropped:
                self._chunks.append(chunk)
            if done or error is not None:
                self._done, self._error = True, error
            self._version += 1
            wake, self._wake = self._wake, None
        if wake is not None:
            wake()

    # --- the event loop
    def head(self) -> tuple[bool | None, int]:
        """(True once the status and headers are in, False when the request failed before, else None; the
        publications so far, for ``wake_after``)."""
        with self._lock:
            return (True if self._head else False if self._done else None), self._version

    def chunks(self) -> tuple[bytes | None, int]:
        """(what has arrived of the body since the last call, ``b""`` at its end, None when nothing new
        has; the publications so far). ``EarlyListError`` when the transport failed."""
        with self._lock:
            if self._chunks:
                chunks, self._chunks = self._chunks, []
                return (chunks[0] if len(chunks) == 1 else b"".join(chunks)), self._version
            if self._done:
                if self._error is not None:
                    raise EarlyListError(f"{type(self._error).__name__}: {self._error or 'timed out'}")
                return b"", self._version
            return None, self._version

    def wake_after(self, version: int, wake: Callable[[], None]) -> bool:
        """Have ``wake`` called (on the thread) at the publication after ``version``: True; False when it
        has happened already (nothing is called)."""
        with self._lock:
            if self._version != version:
                return False
            self._wake = wake
            return True

    def discard(self) -> None:
        """Keep nothing more of the answer; its thread stops at its next read."""
        with self._lock:
            self._dropped = True
            self._chunks = []


def fetch(answers: Sequence[EarlyAnswer], access: ClusterAccess, context: ssl.SSLContext | None) -> None:
    """Each of ``answers`` in turn on one kept-alive connection (a thread's work). A failure is told to
    the answer it met and to those after it (their reflectors ask again, as they would have)."""
    url = urllib.parse.urlsplit(access.server)
    connection: http.client.HTTPConnection | None = None
    done = 0
    try:
        if url.scheme == "https":
            connection = http.client.HTTPSConnection(url.hostname or "", url.port, timeout=EARLY_TIMEOUT,
                                                     context=context)
        else:
            connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=EARLY_TIMEOUT)
        for answer in answers:
            answer.receive(connection, access, url.path.rstrip("/"))
            done += 1
    except Exception as error:  # (any failure: the reflectors' own requests tell it as usual)
        for answer in answers[done:]:
            answer.fail(error)
    finally:
        if connection is not None:
            connection.close()


@attrs.define(eq=False)
class EarlyLists:
    """The early answers of one API access (``choice``, loaded as ``access``), by path."""

    choice: AccessChoice
    access: ClusterAccess
    answers: dict[str, EarlyAnswer]

    def take(self, path: str, params: Mapping[str, str] | None) -> EarlyAnswer | None:
        """The answer to this very request, once; an answer asked for with another query is dropped."""
        answer = self.answers.pop(path, None)
        if answer is not None and answer.params != dict(params or {}):
            answer.discard()
            return None
        return answer

    def discard(self) -> None:
        for answer in self.answers.values():
            answer.discard()
        self.answers.clear()


def run_options(argv: Sequence[str]) -> tuple[str | None, str | None, str | None] | None:
    """``--kubeconfig``, ``--context`` and ``--config`` of a ``scorer run`` command line; None for any other
    command."""
    if not argv or argv[0] != "run" or "-h" in argv or "--help" in argv:
        return None
    found: dict[str, str | None] = {"--kubeconfig": None, "--context": None, "--config": None}
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in found:
            found[name] = value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return found["--kubeconfig"], found["--context"], found["--config"]


def configured_kubeconfig(config: str) -> str | None:
    """The configuration file's ``clientConnection.kubeconfig``; None when it names none or cannot be read
    here (the service reads the file itself and reports what is wrong with it)."""
    try:  # (the readers the service reads it with, already loaded by scorer.kube.config)
        document = single_document(read_documents(config, limits=CONFIG_LIMITS, strict=False), config)
    except (InputError, OSError):
        return None
    data = document.data if document is not None else None
    connection = data.get("clientConnection") if isinstance(data, dict) else None
    kubeconfig = connection.get("kubeconfig") if isinstance(connection, dict) else None
    return kubeconfig if isinstance(kubeconfig, str) and kubeconfig else None


def start(argv: Sequence[str]) -> EarlyLists | None:
    """The first lists of a ``scorer run`` command line, asked for now on threads; None for anything else."""
    options = run_options(argv)
    if options is None:
        return None
    kubeconfig, kube_context, config = options
    if not kubeconfig and config:
        kubeconfig = configured_kubeconfig(config)
    try:
        choice = choose_access(kubeconfig, kube_context)
        access = choice.load()
        context = access.ssl_context()
    except (InputError, OSError, ValueError):  # (the service reports it as it builds)
        return None
    lists = EarlyLists(choice, access, {})
    first = list_params(DEFAULT_PAGE_SIZE, from_cache=True)
    rest = [*OTHER_LISTS, *(path for pair in VERSIONED for path in pair)]
    for name, paths in (("nodes", NODE_LISTS), ("pods", POD_LISTS), ("the rest", rest)):
        answers = [EarlyAnswer(path, {} if path in DISCOVERY else first) for path in paths]
        lists.answers.update((answer.path, answer) for answer in answers)
        threading.Thread(target=fetch, args=(answers, access, context), name=f"early lists: {name}",
                         daemon=True).start()
    return lists
