"""The recorder: ``python -m recorder``, a single-replica process that watches managed pods
through its own connection, keeps one record per pod lifecycle in SQLite, and serves the run
records read-only over HTTPS to callers Kubernetes authenticates and authorizes
(``sluicegate records export`` and ``report`` read them through the API server, as the
aggregated API records.sluicegate.dev)."""
