"""The gate controller: ``python -m controller``.

``managed``      the managed pods as the cache keeps them
``coalescing``   the work queue: a burst of changes makes one cycle
``controlling``  the dispatch loop: snapshot, decide, release, explain, report
``snapshots``    the managed pods as the Snapshot ``policy.dispatching`` decides over
``assumptions``  releases counted before the watch confirms them
``releasing``    gate removals: bounded, retried with backoff, each counted once
``conditions``   what the Dispatched condition says; ``explaining`` writes it, and events;
                 ``describing`` chooses which pods' words to write
``statuses``     Queue, Team and Policy status and the figures behind the gauges;
                 ``reporting`` writes them at a bounded rate
``pacing``       long passes cut into steps that let the event loop breathe
``metrics``      the controller's Prometheus metrics
``settings``     flags and environment
``application``  probes and metrics on the plain port
``serving``      the process: builds every collaborator, mounts the scheduler extender
"""
