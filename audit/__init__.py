"""The shared test record and load driver: an auditor independent of the product.

``audit`` talks to the API server through its own aiohttp connection (``connection``), never
through ``kube/``, so a bug in the controller's client cannot hide itself from the checks.

- ``connection`` credentials from a kubeconfig; a pool of keep-alive connections; watch streams
- ``naming``     what a queueing system calls its gates, queue, team, workflow and group
- ``records``    the record: pods, their transitions with timestamps (pure data)
- ``watching``   list, then watch with resourceVersion and bookmarks; relist on 410 Gone
- ``recording``  the Recorder: watches pods and keeps the record; a background-thread form
- ``background`` an asyncio loop in a thread, for synchronous callers
- ``checking``   pure checks over a record: running sets, peaks, limits, alternation, losses
- ``latencies``  pure figures over a record: creation -> release, freed slot -> release, drain
- ``loading``    the load driver: namespaces per team, N GPU pods over Q queues
- ``ungating``   the bare ungater: removes gates with no policy, optionally capped
- ``scraping``   the API server's request counters and a process's CPU and memory
- ``identities`` separate client identities, so the API server counts each system apart
"""
