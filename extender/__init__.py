"""The gate controller and the scheduler extender: ``python -m extender``.

``managed``      the managed pods as the cache keeps them
``coalescing``   the work queue: a burst of changes makes one cycle
``controlling``  the dispatch loop: snapshot, decide, release, explain, report
``assumptions``  releases counted before the watch confirms them
``releasing``    gate removals: bounded, retried with backoff, each counted once
``conditions``   what the Dispatched condition says; ``explaining`` writes it, and events
``statuses``     Queue, Team and Policy status and the figures behind the gauges;
                 ``reporting`` writes them at a bounded rate
``metrics``      the controller's Prometheus metrics
``application``  probes, metrics and the extender's mount point; ``serving`` the process
"""
