"""The Kubernetes API side of ``scorer run`` (plain aiohttp, no generated client).

``config``: how to reach the API server (kubeconfig or in-cluster);
``ratelimit``: the client-side token bucket of ``clientConnection.qps``/``burst``;
``client``: bounded requests and streamed responses (watches) through both;
``early``: the reflectors' first lists, asked for while the modules load;
``listing``: a LIST answer decoded item by item as it arrives;
``writer``: bindings, Events and the PodScheduled condition (the
``ClusterWriter`` of ``scorer.cluster.interface``); ``apiresources``: the
resources read (path, kind, decoder, handlers); ``reflector``: one resource
listed and watched into the object handlers; ``source``: the reflectors
together, the ``ClusterSource`` of a real cluster.
"""
