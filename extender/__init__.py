"""The scheduler extender: ``python -m extender`` alone, or mounted by the gate controller.

``scheduling``         kube-scheduler's ``/filter`` and ``/prioritize`` over ``policy.placing``
``messages``           the extender's wire format (ExtenderArgs, ExtenderFilterResult, …)
``nodes``              the node view: Nodes and the bound pods' requests, from reflectors
``placement_metrics``  the extender's Prometheus metrics
``application``        ``extender_app``: the application a process mounts over its own cache
``serving``            the extender as a process of its own (its cache, TLS, probes)

It imports nothing from ``controller``; the controller's process mounts ``extender_app``.
"""
