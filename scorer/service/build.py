"""Building the service from ``scorer run``'s options: configuration, API access, clients, parts.

* The configuration file is read once for ``clientConnection`` and
  ``leaderElection``, then assembled (profiles, plugins, queue, scheduler).
* API access: ``--kubeconfig``, else ``clientConnection.kubeconfig``, else the
  in-cluster service account (``KUBERNETES_SERVICE_HOST`` set), else
  ``$KUBECONFIG`` or ``~/.kube/config`` when that file exists
  (``choose_access``). The first lists, asked for while the modules loaded
  (``options.early_lists``), are read by the reflectors when they were asked
  for with the same access.
* Three API clients, each with its own token bucket of ``clientConnection``
  ``qps``/``burst``, as kube-scheduler keeps separate clients: the reflectors
  and bindings (and the other writes: pod conditions, preemption deletes,
  volume updates); Events (a flood of Events cannot hold up bindings); the
  leader elector (its renewals never wait behind either, and time out within
  ``renewDeadline``). All send the user agent ``scorer/<version>``.
* The clients count their requests in client-go's ``rest_client_*`` families
  (``RestClientMetrics``, one for the three, in the app's collector registry).
* With leader election, the leader's writes are fenced: the first client
  (bindings, preemption deletes, status and volume writes) and the
  scheduling loop ask the elector's ``is_leader`` before each write and each
  cycle (``ApiClient.fence``, ``Scheduler.fence``).

Every problem found here (a bad configuration, a missing or wrong kubeconfig)
is an ``InputError`` with one clear message; the command exits 2. An API server
that cannot be reached is not one: the reflectors retry with backoff while
``/readyz`` says what they wait for.
"""

from __future__ import annotations

from collections.abc import Callable

from scorer.assembly import assemble
from scorer.config import SchedulerConfig, load_and_resolve
from scorer.errors import ConfigError, InputError
from scorer.kube.client import DEFAULT_TIMEOUT, ApiClient, RestClientMetrics
from scorer.kube.config import ClusterAccess, choose_access
from scorer.kube.early import USER_AGENT, EarlyLists
from scorer.kube.leader import LeaderElector
from scorer.kube.reflector import EXTENDER_WATCH_COALESCE, WATCH_COALESCE
from scorer.kube.source import ApiSource
from scorer.kube.writer import ApiWriter
from scorer.metrics import SchedulerMetrics
from scorer.registry import build_registry
from scorer.service.app import Service
from scorer.service.options import ServiceOptions
from scorer.sources import load_snapshot


def resolve_access(options: ServiceOptions, config: SchedulerConfig) -> tuple[ClusterAccess, EarlyLists | None]:
    """The API access, and the early lists (``scorer.kube.early``) when they were asked for with it (the
    access they loaded is taken then; otherwise they are dropped)."""
    choice = choose_access(options.kubeconfig or config.client_connection.kubeconfig, options.context)
    early = options.early_lists
    if early is not None and early.choice == choice:
        return early.access, early
    if early is not None:
        early.discard()
    return choice.load(), None


def check_extender_options(options: ServiceOptions, profiles: list[str]) -> None:
    if options.no_scheduling and not options.extender_profile:
        raise InputError("--no-scheduling serves only the extender: give --extender-profile NAME too")
    if options.extender_profile is not None and options.extender_profile not in profiles:
        raise InputError(f"--extender-profile: {options.config} has no profile {options.extender_profile!r} "
                         f"(profiles: {', '.join(profiles) or 'none'})")
    prefix = options.extender_prefix
    if not prefix.startswith("/") or any(c in prefix for c in "?#{} ") or "//" in prefix:
        raise InputError(f"--extender-prefix: expected a URL path such as /scheduler, got {prefix!r}")


def build_service(options: ServiceOptions) -> Service:
    registry = build_registry(autoload=options.autoload, blocked=options.blocked)
    config, _ = load_and_resolve(options.config, registry.catalog())
    check_extender_options(options, [profile.scheduler_name for profile in config.profiles])
    snapshot = load_snapshot(options.metrics_file) if options.metrics_file else None
    access, early = resolve_access(options, config)
    connection = config.client_connection
    metrics = SchedulerMetrics()
    rest_metrics = RestClientMetrics(metrics.collector_registry)

    def client(timeout: float = DEFAULT_TIMEOUT, early: EarlyLists | None = None) -> ApiClient:
        return ApiClient(access, qps=connection.qps, burst=connection.burst, user_agent=USER_AGENT, timeout=timeout,
                         metrics=rest_metrics, early=early)

    api, events = client(early=early), client()  # (the reflectors list through the first)
    writer = ApiWriter(api, events_client=events, collector_registry=metrics.collector_registry,
                       controller=config.profiles[0].scheduler_name if config.profiles else "default-scheduler")
    asm = assemble(options.config, writer, registry=registry, metrics=metrics, seed=options.seed,
                   metrics_snapshot=snapshot)
    clients = [api, events]
    election = config.leader_election
    elector = None
    if election.leader_elect and not options.no_scheduling:  # (an extender alone binds nothing: no lease)
        elector_client = client(timeout=election.renew_deadline.total_seconds())
        clients.append(elector_client)
        try:
            elector = LeaderElector.from_config(elector_client, election, collector_registry=metrics.collector_registry)
        except ValueError as exc:
            raise ConfigError([("leaderElection", str(exc))], options.config) from None
    # (an extender alone: its watches read in longer batches, EXTENDER_WATCH_COALESCE)
    source = ApiSource(api, collector_registry=metrics.collector_registry,
                       watch_coalesce=EXTENDER_WATCH_COALESCE if options.no_scheduling else WATCH_COALESCE)
    service = Service(asm, source, options, elector=elector, clients=clients, source_status=source.status,
                      finalizers=[writer.flush_series])
    if elector is not None:
        fence = elector_fence(elector)
        api.fence = fence  # bindings, preemption deletes, status and volume writes (Events are not fenced)
        asm.scheduler.fence = fence
    return service


def elector_fence(elector: LeaderElector) -> Callable[[], bool]:
    """The fence of a leader's writes and cycles: whether it leads, judged on its monotonic clock
    (``LeaderElector.is_leader``: False once ``renewDeadline`` passed since its last successful renew)."""
    return lambda: elector.is_leader
