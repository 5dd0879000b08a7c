"""The command line of ``scorer run``, as one value the service is built from."""

from __future__ import annotations

import attrs

from scorer.kube.early import EarlyLists

DEFAULT_PORT = 10259  # kube-scheduler's DefaultKubeSchedulerPort
DEFAULT_SHUTDOWN_TIMEOUT = 15.0  # SIGTERM to exit, bindings and lease release included
DEFAULT_BINDING_GRACE = 10.0  # of which in-flight bindings may take this long
DEFAULT_HTTP_TIMEOUT = 15.0  # a connection's idle time, a request head's and a request body's (scorer.service.run)


@attrs.frozen(slots=True)
class ServiceOptions:
    """``config``: the KubeSchedulerConfiguration file. ``kubeconfig`` overrides its
    ``clientConnection.kubeconfig``; with neither, the in-cluster service account
    (else ``$KUBECONFIG`` or ``~/.kube/config`` when one exists)."""

    config: str
    kubeconfig: str | None = None
    context: str | None = None
    bind_address: str = "0.0.0.0"
    port: int = DEFAULT_PORT
    tls_cert_file: str | None = None
    tls_private_key_file: str | None = None
    log_format: str = "text"
    enable_debug_endpoints: bool = False
    autoload: bool | None = None
    blocked: tuple[str, ...] = ()
    seed: int | None = None  # tie breaks; None: random
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT
    binding_grace: float = DEFAULT_BINDING_GRACE
    http_timeout: float = DEFAULT_HTTP_TIMEOUT  # idle connections, slow request heads and bodies are cut after this
    # Extender mode (``scorer.extender``): serve kube-scheduler's extender calls with this profile.
    extender_profile: str | None = None
    extender_prefix: str = "/scheduler"
    no_scheduling: bool = False  # serve only the extender, health and metrics: bind nothing, no leader election
    metrics_file: str | None = None  # a MetricsSnapshot the metric-driven plugins read instead of Prometheus
    # The first lists, asked for while the modules loaded (scorer.kube.early; the scorer command starts them).
    early_lists: EarlyLists | None = attrs.field(default=None, eq=False, repr=False)
