"""The scheduler extender: kube-scheduler's ``filter`` and ``prioritize`` calls over ``policy.placing``.

``scheduling_app(nodes, catalog)`` builds the aiohttp application (POST ``/filter`` and
``/prioritize``); the controller process serves it over TLS, and ``python -m extender`` serves it alone
(``extender.serving``) for tests and debugging.

- ``filter`` keeps a queue's pods on the queue's ``nodePool``. Nodes outside it come back in
  ``FailedAndUnresolvableNodes`` with the reason (preempting pods there could never help); so
  does a candidate the node view does not know yet, when the pod's queue has a pool to check.
- ``prioritize`` packs GPUs (0..10, highest for the node the pod leaves with the fewest free
  GPUs of the Policy's managed resources); a node the view does not know scores 0.
- When the extender cannot judge (the request is malformed or too big, its cache has not
  listed everything yet, the pod's Queue cannot be read), ``filter`` answers 200 with
  ``Error``, which makes kube-scheduler skip an ignorable extender for that pod; ``prioritize``,
  whose answer is a bare list, answers 400, 413 or 503 with ``{"Error": ...}``, which the
  scheduler also treats as "no scores from this extender". Only a fault of this code is a 500.
  Every one of these answers is made in the one middleware.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web
from aiohttp.typedefs import Middleware

from extender.messages import (
    Args,
    BadArgs,
    ErrorAnswer,
    ExtenderFilterResult,
    HostPriority,
    NodeList,
    read_args,
)
from extender.nodes import NodeSource, with_usage
from extender.placement_metrics import Outcome, PlacementMetrics
from policy.catalog import Catalog
from policy.fields import InvalidObject
from policy.model import Queue
from policy.placing import Node, filter_nodes, prioritize
from policy.pods import Pod

log = logging.getLogger(__name__)

# A pod is at most etcd's 1.5 MiB; NodeNames of a 5,000-node cluster add about 0.2 MiB. 4 MiB
# holds both with room to spare, and whole Nodes (when not nodeCacheCapable) of a small cluster.
MAX_BODY_BYTES: Final = 4 * 1024 * 1024

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class CannotJudge(Exception):
    """The extender cannot decide for this request; the message says why."""


class Placement:
    """The two decisions, from a node view and the catalog as they are at the call."""

    def __init__(
        self, nodes: NodeSource, catalog: Callable[[], Catalog], metrics: PlacementMetrics | None = None
    ) -> None:
        self.nodes = nodes
        self.catalog = catalog
        self.metrics = metrics if metrics is not None else PlacementMetrics()

    def _facts(self, args: Args) -> tuple[Pod, Queue | None, Catalog]:
        if not self.nodes.synced:
            raise CannotJudge("the extender's cache has not listed nodes, pods, Queues and the Policy yet")
        try:
            pod = Pod.parse(args.pod)
        except InvalidObject as e:
            raise BadArgs(f"Pod cannot be read: {e}") from e
        catalog = self.catalog()
        queue = catalog.queues.get(pod.queue) if pod.queue else None
        if pod.queue and queue is None:
            problem = catalog.problem("Queue", pod.queue)
            if problem:
                raise CannotJudge(f"queue {pod.queue} cannot be read, so its node pool is unknown: {problem}")
        return pod, queue, catalog

    def _candidates(self, args: Args) -> tuple[list[Node], set[str]]:
        """The candidate nodes with their usage, and the names of those the view does not know."""
        unknown: set[str] = set()
        out: list[Node] = []
        if args.names is not None:
            for name in args.names:
                node = self.nodes.node(name)
                if node is None:
                    unknown.add(name)
                    node = Node(name)
                out.append(node)
            return out, unknown
        for raw in args.nodes or ():
            try:
                node = Node.parse(raw)
            except InvalidObject as e:
                raise BadArgs(str(e)) from e
            out.append(with_usage(node, self.nodes.requested(node.name)))
        return out, unknown

    def filter(self, args: Args) -> ExtenderFilterResult:
        pod, queue, _ = self._facts(args)
        candidates, unknown = self._candidates(args)
        filtered = filter_nodes(pod, queue, candidates)
        failed = {
            name: f"node {name} is not known to the scheduler extender yet" if name in unknown else why
            for name, why in filtered.failed.items()
        }
        if failed:
            self.metrics.left_out.inc(len(failed))
            log.info("filter pod=%s queue=%s: %d of %d nodes left out: %s", pod.key, pod.queue,
                     len(failed), len(candidates), next(iter(failed.values())))
        else:
            log.debug("filter pod=%s queue=%s: all %d nodes pass", pod.key, pod.queue, len(candidates))
        result = ExtenderFilterResult(FailedNodes={}, FailedAndUnresolvableNodes=failed)
        if args.names is not None:
            result["NodeNames"] = list(filtered.names)
        else:
            kept = set(filtered.names)
            result["Nodes"] = NodeList(items=[n for n in args.nodes or () if n["metadata"]["name"] in kept])
        return result

    def prioritize(self, args: Args) -> list[HostPriority]:
        pod, _, catalog = self._facts(args)
        candidates, unknown = self._candidates(args)
        known = [n for n in candidates if n.name not in unknown]
        scores = prioritize(pod, known, catalog.policy.managed_resources)
        log.debug("prioritize pod=%s queue=%s: %s", pod.key, pod.queue, scores)
        return [HostPriority(Host=n.name, Score=scores.get(n.name, 0)) for n in candidates]


def _answer(verb: str, status: int, message: str) -> web.Response:
    """An error in the shape each verb's caller reads: filter's Error field (200) unless this
    server is at fault; prioritize's status, with the message in the body for humans."""
    if verb == "filter" and status != 500:
        return web.json_response(ExtenderFilterResult(Error=message))
    return web.json_response(ErrorAnswer(Error=message), status=status)


def _errors(max_body_bytes: int, metrics: PlacementMetrics) -> Middleware:
    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        verb = request.match_info.route.name or ""
        started = time.perf_counter()

        def counted(outcome: Outcome, response: web.StreamResponse) -> web.StreamResponse:
            metrics.answered(verb, outcome, time.perf_counter() - started)
            return response

        try:
            response = await handler(request)
        except BadArgs as e:
            log.info("%s: refused a malformed request from %s: %s", verb, request.remote, e)
            return counted("malformed", _answer(verb, 400, f"malformed ExtenderArgs: {e}"))
        except web.HTTPRequestEntityTooLarge:
            log.warning("%s: refused a request body over %d bytes from %s", verb, max_body_bytes,
                        request.remote)
            too_large = f"the request body is larger than {max_body_bytes} bytes"
            return counted("too_large", _answer(verb, 413, too_large))
        except CannotJudge as e:
            log.info("%s: stepping aside: %s", verb, e)
            return counted("not_ready", _answer(verb, 503, str(e)))
        except web.HTTPException:
            raise  # routing's own answers: 404, 405
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("fault while answering %s %s", request.method, request.path)
            fault = "internal error; the scheduler extender's log has the details"
            return counted("error", _answer(verb, 500, fault))
        return counted("answered", response)

    return errors


def scheduling_app(
    nodes: NodeSource,
    catalog: Callable[[], Catalog],
    *,
    metrics: PlacementMetrics | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> web.Application:
    """The extender's application: ``POST /filter`` and ``POST /prioritize``.

    ``nodes`` is the node view (``extender.nodes.ClusterNodes(cache)`` in a process) and
    ``catalog`` gives the Queues and the Policy as they are now (``cache.catalog``). The
    resources packed as GPUs are the Policy's ``managedResources``, read at every call.
    ``metrics``: give ``PlacementMetrics(registry)`` to count calls on the process's registry.
    """
    metrics = metrics if metrics is not None else PlacementMetrics()
    placement = Placement(nodes, catalog, metrics)

    async def filter_(request: web.Request) -> web.Response:
        return web.json_response(placement.filter(read_args(await request.read())))

    async def prioritize_(request: web.Request) -> web.Response:
        return web.json_response(placement.prioritize(read_args(await request.read())))

    app = web.Application(client_max_size=max_body_bytes, middlewares=[_errors(max_body_bytes, metrics)])
    app.add_routes([
        web.post("/filter", filter_, name="filter"),
        web.post("/prioritize", prioritize_, name="prioritize"),
    ])
    return app

