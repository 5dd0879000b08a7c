"""``scorer run``: the scheduler service (reference §6, §8; DESIGN.md "Kubernetes API layer").

* ``options``: the command line of ``scorer run``.
* ``logs``: one line per log event, as text or JSON.
* ``health``: ``/healthz``, ``/livez``, ``/readyz`` checks with kube's verbose format.
* ``app``: the aiohttp application: one cleanup context per long-lived part (API session,
  cluster source, metric sources, leader elector, scheduling loop), ``/metrics`` and the probes;
  its background tasks run under a ``scorer.tasks.Supervisor`` (named, restarted or fatal).
* ``run``: signals, the HTTP listener, the bounded shutdown and the exit status.
"""
