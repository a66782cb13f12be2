"""Who calls a listener that serves data, and whether Kubernetes lets them: one aiohttp
middleware (``guard``) for every such listener.

For each request, in this order:

1. A path the listener keeps open (``open_paths``: discovery, probes) passes untouched.
2. The API server's front proxy (the aggregation layer): the TLS handshake verified the
   caller's client certificate against the front-proxy CA the API server publishes (the server
   context is made with ``FrontProxy.ca``, ``process.certificates``), and its common name is one
   the API server allows. The caller is then the user the proxy's ``X-Remote-*`` headers name.
   The same headers from anyone else are ignored: anyone can write a header.
3. Else a bearer token (``Authorization: Bearer ...``), which the API server reviews
   (TokenReview): unknown to it, 401.
4. Else 401, and nothing is asked of the API server: requests without credentials cost no
   review, however many arrive.
5. What the route needs (``needs(request)``: an ``Access``, or None for any authenticated
   caller) is put to the API server for that identity (SubjectAccessReview): refused, 403.

Refusals are JSON ``{"error": ...}`` saying what was missing or who may not do what; when the
API server cannot be asked, 503 (nothing is let through on a failed review). The answers of
both reviews are remembered for seconds (``kube.remembering``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Protocol
from urllib.parse import unquote

from aiohttp import web
from aiohttp.typedefs import Middleware
from multidict import CIMultiDictProxy

from kube.authenticating import FrontProxy, Identity, TokenReviews
from kube.authorizing import Access, AccessReviews
from kube.connecting import Connection, KubeError

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
IDENTITY = web.RequestKey("identity", Identity)
"""Where a handler finds who called (``request[IDENTITY]``)."""
Needs = Callable[[web.Request], Access | None]
"""What a request needs the caller to be allowed: an ``Access``, or None (authenticated is enough)."""


class Reviewer(Protocol):
    """The API server's answers (``Reviews`` in a running server, a stand-in in tests)."""

    async def identity(self, token: str) -> Identity | None: ...

    async def allowed(self, identity: Identity, access: Access) -> bool: ...


class Reviews:
    """TokenReviews and SubjectAccessReviews through one connection, each remembered briefly."""

    def __init__(self, connection: Connection) -> None:
        self.tokens = TokenReviews(connection)
        self.access = AccessReviews(connection)

    async def identity(self, token: str) -> Identity | None:
        return await self.tokens.identity(token)

    async def allowed(self, identity: Identity, access: Access) -> bool:
        return await self.access.allowed(identity.user_info(), access)


class Refused(Exception):
    """Why a request is not answered: 401 (who is calling is not known), 403 (Kubernetes
    says no) or 503 (the API server could not be asked)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def answer(self) -> web.Response:
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else None
        return web.json_response({"error": self.message}, status=self.status, headers=headers)


def peer_name(request: web.Request) -> str | None:
    """The common name of the client certificate the TLS handshake verified; None without one
    (``getpeercert`` gives an empty dict for a certificate it did not verify)."""
    transport = request.transport
    cert = transport.get_extra_info("peercert") if transport is not None else None
    if not isinstance(cert, Mapping) or not cert:
        return None
    for rdn in cert.get("subject", ()):
        for name, value in rdn:
            if name == "commonName":
                return str(value)
    return ""


def _first(headers: CIMultiDictProxy[str], names: Collection[str]) -> str:
    for name in names:
        for value in headers.getall(name, []):
            if value:
                return value
    return ""


def proxied_identity(headers: CIMultiDictProxy[str], proxy: FrontProxy) -> Identity | None:
    """The user the front proxy's headers name (as the API server's request-header
    authenticator reads them: the first user and uid, every group, extra keys unescaped and
    lower-cased); None when they name no user."""
    user = _first(headers, proxy.username_headers)
    if not user:
        return None
    groups = tuple(v for name in proxy.group_headers for v in headers.getall(name, []))
    extra: dict[str, list[str]] = {}
    for name, value in headers.items():
        for prefix in proxy.extra_prefixes:
            if name.lower().startswith(prefix.lower()):
                extra.setdefault(unquote(name[len(prefix):]).lower(), []).append(value)
    return Identity(user=user, uid=_first(headers, proxy.uid_headers), groups=groups,
                    extra=tuple(sorted((k, tuple(v)) for k, v in extra.items())), via="front proxy")


def bearer(headers: CIMultiDictProxy[str]) -> str:
    scheme, _, token = headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def is_front_proxy(proxy: FrontProxy, name: str | None) -> bool:
    """Whether a verified client certificate with this common name (None: no certificate) is
    the front proxy's: any name the API server allows, or any at all when it names none."""
    return name is not None and (not proxy.allowed_names or name in proxy.allowed_names)


def guard(
    reviewer: Reviewer,
    needs: Needs,
    *,
    front_proxy: FrontProxy | None = None,
    open_paths: Collection[str] = (),
    hint: str = "",
    refused: Callable[[Refused], None] | None = None,
    peer: Callable[[web.Request], str | None] = peer_name,
) -> Middleware:
    """The middleware. ``hint`` ends the 401 answer (how to call this listener properly);
    ``refused`` is told of every refusal (a metric); ``peer`` reads the verified client
    certificate's name (tests stand in for a TLS handshake with it)."""
    missing = "no credentials: this listener answers only callers Kubernetes authenticates" + (
        f"; {hint}" if hint else "")

    async def caller(request: web.Request) -> Identity:
        if front_proxy is not None and is_front_proxy(front_proxy, peer(request)):
            proxied = proxied_identity(request.headers, front_proxy)
            if proxied is None:
                raise Refused(401, "the front proxy's request names no user")
            return proxied
        token = bearer(request.headers)
        if not token:
            raise Refused(401, missing)
        try:
            identity = await reviewer.identity(token)
        except KubeError as e:
            raise Refused(503, f"cannot ask the API server who is calling: {e}") from e
        if identity is None:
            # Anyone who reaches the port can send these: at info they would fill the log.
            log.debug("refused a bearer token the API server does not accept, from %s", request.remote)
            raise Refused(401, "the API server does not accept this bearer token")
        return identity

    async def authorized(request: web.Request, identity: Identity) -> None:
        access = needs(request)
        if access is None:
            return
        try:
            allowed = await reviewer.allowed(identity, access)
        except KubeError as e:
            raise Refused(503, f"cannot ask the API server whether {identity.user} may {access}: {e}") from e
        if not allowed:
            log.debug("refused %s %s: %s (%s) may not %s", request.method, request.path, identity.user,
                     identity.via, access)
            raise Refused(403, f'user "{identity.user}" may not {access}')

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in open_paths:
            return await handler(request)
        try:
            identity = await caller(request)
            await authorized(request, identity)
        except Refused as e:
            if refused is not None:
                refused(e)
            return e.answer()
        request[IDENTITY] = identity
        return await handler(request)

    return middleware
