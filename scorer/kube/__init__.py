"""The Kubernetes API side of ``scorer run`` (plain aiohttp, no generated client).

``config``: how to reach the API server (kubeconfig or in-cluster);
``ratelimit``: the client-side token bucket of ``clientConnection.qps``/``burst``.
The reflectors, binder and event writer of the service build on these.
"""
