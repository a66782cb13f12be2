"""Asking the API server who a caller is: TokenReviews, and the front proxy it vouches with.

A listener that serves data believes two kinds of caller, and nothing else:

- a bearer token, which the API server reviews (``TokenReviews``: a TokenReview per token,
  remembered briefly, ``kube.remembering``);
- the API server's own front proxy, the aggregation layer, which connects with the client
  certificate of ``--proxy-client-cert-file`` and names the user it authenticated in the
  ``X-Remote-User``/``X-Remote-Group``/``X-Remote-Extra-*`` headers. The certificate authority
  that signs that certificate, the names it may carry and the headers are what the API server
  publishes in the ConfigMap ``kube-system/extension-apiserver-authentication``
  (``front_proxy``), as every aggregated API server reads them.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kube.connecting import ApiError, Connection
from kube.remembering import Remembered

TOKEN_REVIEWS: Final = "/apis/authentication.k8s.io/v1/tokenreviews"
AUTHENTICATION_CONFIGMAP: Final = (
    "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication")
# As long as Kubernetes' own delegated authentication remembers a TokenReview's answer.
CACHE_SECONDS: Final = 10.0


@dataclass(frozen=True, slots=True)
class Identity:
    """A caller as Kubernetes authenticated it."""

    user: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    via: str = "token"
    """How it was authenticated: ``token`` or ``front proxy``."""

    def user_info(self) -> dict[str, Any]:
        """As a SubjectAccessReview (and an AdmissionReview's userInfo) carries it."""
        info: dict[str, Any] = {"username": self.user}
        if self.uid:
            info["uid"] = self.uid
        if self.groups:
            info["groups"] = list(self.groups)
        if self.extra:
            info["extra"] = {k: list(v) for k, v in self.extra}
        return info

    @classmethod
    def from_user_info(cls, info: Mapping[str, Any], via: str) -> Identity:
        groups = info.get("groups")
        extra = info.get("extra")
        return cls(
            user=str(info.get("username") or ""),
            uid=str(info.get("uid") or ""),
            groups=tuple(str(g) for g in groups) if isinstance(groups, list) else (),
            extra=tuple(sorted((str(k), tuple(str(v) for v in vs)) for k, vs in extra.items()
                               if isinstance(vs, list))) if isinstance(extra, Mapping) else (),
            via=via,
        )


@dataclass(frozen=True, slots=True)
class FrontProxy:
    """The API server's front proxy, as it publishes it: the CA that signs the proxy's client
    certificate, the common names that certificate may carry (any, when empty), and the headers
    that name the user it authenticated."""

    ca: str
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    uid_headers: tuple[str, ...] = ()
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)


def _strings(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """One of the ConfigMap's lists (JSON, as the API server writes them)."""
    raw = data.get(key)
    if not raw:
        return ()
    try:
        values = json.loads(raw)
    except (TypeError, ValueError):
        return ()
    return tuple(str(v) for v in values) if isinstance(values, list) else ()


def front_proxy_of(configmap: Mapping[str, Any]) -> FrontProxy | None:
    """The front proxy the ConfigMap describes, or None when the API server has none
    (started without ``--requestheader-client-ca-file``)."""
    data = configmap.get("data")
    if not isinstance(data, Mapping):
        return None
    ca = data.get("requestheader-client-ca-file")
    if not isinstance(ca, str) or "BEGIN CERTIFICATE" not in ca:
        return None
    return FrontProxy(
        ca=ca,
        allowed_names=_strings(data, "requestheader-allowed-names"),
        username_headers=_strings(data, "requestheader-username-headers"),
        uid_headers=_strings(data, "requestheader-uid-headers"),
        group_headers=_strings(data, "requestheader-group-headers"),
        extra_prefixes=_strings(data, "requestheader-extra-headers-prefix"),
    )


async def front_proxy(connection: Connection) -> FrontProxy | None:
    """What the API server publishes about its front proxy; None when it has none. Reading it
    needs the Role ``extension-apiserver-authentication-reader`` in kube-system; a refusal
    raises ``ApiError``, since a listener that cannot tell the proxy from anyone else must not
    start as if it could."""
    try:
        configmap = await connection.get(AUTHENTICATION_CONFIGMAP)
    except ApiError as e:
        if e.not_found:
            return None
        raise
    return front_proxy_of(configmap)


def token_review(token: str) -> dict[str, Any]:
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}


class TokenReviews:
    """Who a bearer token belongs to, as the API server says (None: not a valid token),
    remembered briefly by the token's SHA-256. A failed request raises ``KubeError``."""

    def __init__(
        self,
        connection: Connection,
        *,
        seconds: float = CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.connection = connection
        self.answers: Remembered[str, Identity | None] = Remembered(seconds=seconds, clock=clock)

    async def identity(self, token: str) -> Identity | None:
        async def ask() -> Identity | None:
            answer = await self.connection.request("POST", TOKEN_REVIEWS, body=token_review(token))
            status = answer.get("status")
            if not isinstance(status, Mapping) or status.get("authenticated") is not True:
                return None
            user = status.get("user")
            if not isinstance(user, Mapping) or not user.get("username"):
                return None
            return Identity.from_user_info(user, "token")

        return await self.answers.get(hashlib.sha256(token.encode()).hexdigest(), ask)
