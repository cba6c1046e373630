"""The Kubernetes API server in front of the event log: the real kubectl and the client
libraries work against daemonbus unchanged.

A thin HTTP front on the store: discovery, OpenAPI, get/list (the view at a position),
create/update/patch/delete (the store's one commit, as the request's user), watch (one tail
of the log per process, fanned out in memory by ``watchcache``), Tables, and errors as
``meta/v1 Status``. The resourceVersion is the log position. Stateless: run any number.

HTTP library: aiohttp. It is asyncio-native and well kept, streams chunked responses
(every watch is a long-lived chunked stream; thousands of them must cost a coroutine each,
not a thread each), bounds request bodies (``client_max_size``) and speaks TLS through the
standard ``ssl`` module. The store is synchronous and runs in a small thread pool.

Modules: ``server`` (options, safe defaults, start), ``app`` (routing, auth, negotiation),
``handlers`` (the verbs), ``watch`` and ``watchcache`` (streams), ``discovery``, ``requests``
(reading a request), ``listing`` (selection), ``tables``, ``openapi``, ``status`` (errors),
``auth`` (tokens and roles), ``tls`` (generated CA), ``kubeconfig``.
"""
