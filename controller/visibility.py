"""The visibility API ``visibility.sluicegate.dev/v1alpha1``, served by the controller's process
as an aggregated API of the API server (the APIService in manifests/visibility-api).

Routes (each a GET):

- ``/apis/visibility.sluicegate.dev/v1alpha1``: discovery, open (the aggregation layer reads it);
- ``.../namespaces/<ns>/pendingpods``: the namespace's waiting pods, a ``PendingPodList``
  (``controller.pending``); RBAC ``list pendingpods`` in that namespace;
- ``.../namespaces/<ns>/pendingpods/<pod>``: one of them; ``get pendingpods``;
- ``.../queues/<queue>/pendingpods``: a queue's waiting pods across namespaces, for admins;
  ``get queues/pendingpods`` on that queue (cluster-scoped).

The API server authenticates the user, authorizes the request with its own RBAC and proxies it
with its front-proxy client certificate; ``process.callers.guard`` accepts only that
certificate (verified against the CA the API server publishes, its name among the allowed
ones, then the ``X-Remote-*`` headers), or a bearer token the API server accepts, and asks the
API server again whether the caller may (a SubjectAccessReview, remembered for seconds).

The board is built off the dispatch path: ``Viewer`` takes the pods and objects the cache holds,
sorts them as the controller does (``policy.membership``) and takes the dispatch decision again
(``controller.controlling.decide``), in a worker thread, at most once every ``seconds`` and only
when asked; every replica can answer, leader or not. Each board carries the last start estimates
and offers its snapshot to the ``controller.estimates.Estimator``, which makes the next ones
from it, in a thread of their own, when its pace allows.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Final

from aiohttp import web
from aiohttp.typedefs import Middleware

from controller.controlling import PodSource, decide
from controller.estimates import Estimates, Estimator
from controller.managed import ManagedPod
from controller.pending import GROUP_VERSION, Board, board
from kube.authenticating import FrontProxy
from kube.authorizing import Access
from kube.resources import PENDING_PODS
from policy.catalog import Catalog
from policy.keys import Reason
from policy.membership import Membership, held_for_claims, membership
from policy.model import Nodes, Snapshot
from policy.ordering import Turns
from policy.pods import Pod
from policy.workloads import build_workloads
from process.callers import IDENTITY, Reviewer, guard
from process.serving import APIResourceListJSON

log = logging.getLogger(__name__)

DISCOVERY: Final = f"/apis/{GROUP_VERSION}"
QUEUES: Final = "queues"
REFRESH_SECONDS: Final = 2.0
"""How old a board may be when it is read: at most one rebuild per this long, however many reads."""

RESOURCES: Final = APIResourceListJSON(
    kind="APIResourceList", apiVersion="v1", groupVersion=GROUP_VERSION,
    resources=[
        {"name": PENDING_PODS.plural, "singularName": "pendingpod", "namespaced": True,
         "kind": PENDING_PODS.kind, "verbs": ["get", "list"]},
        # Only the subresource is served: `queues` itself lists nothing here (the Queues are
        # sluicegate.dev's), so generic clients leave it alone.
        {"name": QUEUES, "singularName": "queue", "namespaced": False, "kind": "Queue", "verbs": []},
        {"name": f"{QUEUES}/{PENDING_PODS.plural}", "singularName": "", "namespaced": False,
         "kind": PENDING_PODS.kind, "verbs": ["get"]},
    ],
)


def refused_release(managed: ManagedPod) -> str | None:
    """Why the API server refused to release this gated pod, as the leader's condition says
    (``ReleaseRefused``); None when it did not. Only the leader saw the refusal, so its condition
    is the record every replica reads, as the CLI does (``cli.standings.refusals``)."""
    found = managed.condition
    if managed.gates and found is not None and found.status == "False" \
            and found.reason == Reason.RELEASE_REFUSED.value:
        return found.message
    return None


def build_board(
    pods: Sequence[ManagedPod], catalog: Catalog, team_of: Mapping[str, str | None], now: float,
    nodes: Nodes | None, estimates: Estimates | None, version: int,
) -> tuple[Board, Snapshot]:
    """One board, from what the cache held, with the last ``estimates``, and the snapshot it was
    built from: pure, run in a worker thread."""
    counting: list[Pod] = []
    left: list[Pod] = []
    refusals: dict[str, str] = {}
    changed: list[tuple[Pod, str]] = []
    for managed in pods:
        pod = managed.pod
        standing = membership(pod, team_of.get(pod.namespace), marked=managed.marked)
        if standing is Membership.COUNTS and held_for_claims(pod):
            changed.append((pod, managed.condition.message if managed.condition is not None else ""))
        elif standing is Membership.COUNTS:
            counting.append(pod)
        elif standing is Membership.LEFT_TEAM:
            left.append(pod)
        refused = refused_release(managed)
        if refused is not None:
            refusals[pod.uid] = refused
    snapshot = Snapshot(catalog.queues, catalog.teams, catalog.policy, build_workloads(counting), now, nodes,
                        refusals)
    # The round-robin turn lives in the leader's memory: from the first queue by name, as a
    # restarted controller starts.
    decision = decide(snapshot, Turns())
    if estimates is None:
        return board(snapshot, decision, left, version=version, claims_changed=changed), snapshot
    return board(snapshot, decision, left, estimates.by_key, made=estimates.made, version=version,
                 claims_changed=changed), snapshot


class Viewer:
    """The latest board, rebuilt when read and older than ``seconds``, one rebuild at a time."""

    def __init__(
        self,
        pods: PodSource,
        catalog: Callable[[], Catalog],
        team_of: Callable[[str], str | None],
        nodes: Callable[[], Nodes | None] = lambda: None,
        *,
        estimator: Estimator | None = None,
        seconds: float = REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.pods = pods
        self.catalog = catalog
        self.team_of = team_of
        self.nodes = nodes
        self.estimator = estimator
        self.seconds = seconds
        self.clock = clock
        self.wall = wall
        self._board: Board | None = None
        self._built = -float("inf")
        self._building: asyncio.Task[Board] | None = None
        self.builds = 0

    async def board(self) -> Board:
        if self._board is not None and self.clock() - self._built < self.seconds:
            return self._board
        if self._building is None or self._building.done():  # a reader cancelled meanwhile left it done
            self._building = asyncio.create_task(self._build(), name="visibility board")
        building = self._building
        try:
            return await asyncio.shield(building)  # a reader that goes away leaves the build to the others
        finally:
            if building.done() and self._building is building:
                self._building = None

    async def _build(self) -> Board:
        started = self.clock()
        pods = list(self.pods.values())  # copied on the loop: the reflector changes it there
        teams = {ns: self.team_of(ns) for ns in {p.pod.namespace for p in pods}}
        self.builds += 1
        estimates = self.estimator.latest if self.estimator is not None else None
        made, snapshot = await asyncio.to_thread(build_board, pods, self.catalog(), teams, self.wall(),
                                                 self.nodes(), estimates, self.builds)
        self._board, self._built = made, started
        if self.estimator is not None:
            self.estimator.offer(snapshot)  # the next estimates, when the pace allows
        return made


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as e:
        return web.json_response({"error": e.text or e.reason}, status=e.status)
    except Exception:
        log.exception("answering %s failed", request.path)
        return web.json_response({"error": "internal error"}, status=500)


def build_app(viewer: Viewer, reviewer: Reviewer, *, front_proxy: FrontProxy | None) -> web.Application:
    """The visibility API; ``reviewer`` answers who a bearer token is and what a caller may do
    (``process.callers.Reviews``); ``front_proxy``: the API server's (None: bearer tokens only)."""

    def needs(request: web.Request) -> Access | None:
        route = request.match_info.route.name
        info = request.match_info
        if route == "list":
            return Access("list", PENDING_PODS.plural, PENDING_PODS.group, namespace=info["namespace"])
        if route == "get":
            return Access("get", PENDING_PODS.plural, PENDING_PODS.group, namespace=info["namespace"],
                          name=info["name"])
        if route == "queue":
            return Access("get", QUEUES, PENDING_PODS.group, name=info["queue"],
                          subresource=PENDING_PODS.plural)
        return None  # an unknown path: authenticated callers learn it is not found

    async def discovery(_: web.Request) -> web.Response:
        return web.json_response(RESOURCES)

    async def listed(request: web.Request) -> web.Response:
        shown = await viewer.board()
        items = shown.namespace(request.match_info["namespace"])
        caller = request[IDENTITY]
        log.debug("served %d pending pods of %s to %s (%s)", len(items), request.match_info["namespace"],
                  caller.user, caller.via)
        return web.json_response(shown.listing(items))

    async def one(request: web.Request) -> web.Response:
        shown = await viewer.board()
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        item = shown.pod(namespace, name)
        if item is None:
            raise web.HTTPNotFound(text=f"pod {namespace}/{name} is not waiting for Sluicegate")
        return web.json_response(item)

    async def queued(request: web.Request) -> web.Response:
        shown = await viewer.board()
        return web.json_response(shown.listing(shown.queue(request.match_info["queue"])))

    here = f"{DISCOVERY}/namespaces/<namespace>/{PENDING_PODS.plural}"
    checked: Middleware = guard(reviewer, needs, front_proxy=front_proxy, open_paths={DISCOVERY},
                                hint=f"read it through the API server: GET {here}")
    app = web.Application(middlewares=[checked, _errors])
    app.add_routes([
        web.get(DISCOVERY, discovery),
        web.get(f"{DISCOVERY}/namespaces/{{namespace}}/{PENDING_PODS.plural}", listed, name="list"),
        web.get(f"{DISCOVERY}/namespaces/{{namespace}}/{PENDING_PODS.plural}/{{name}}", one, name="get"),
        web.get(f"{DISCOVERY}/{QUEUES}/{{queue}}/{PENDING_PODS.plural}", queued, name="queue"),
    ])
    return app
