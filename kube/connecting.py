"""The connection to the API server, and the errors it raises.

A ``Connection`` speaks plain JSON: requests take and return dicts, and a watch yields its
events as dicts, so no time goes into kubernetes_asyncio's model classes (policy reads dicts
anyway). kubernetes_asyncio is used for what it does well: reading kubeconfig files (client
certificates, tokens, exec plugins) and keeping the authenticated HTTP session.

Three ways to connect, in the order ``Connection.open`` tries them: a kubeconfig file; a server
URL with a token file and a CA file (how ``make up`` runs Sluicegate as its service accounts);
the in-cluster service-account files. A token file is read again every minute, so a rotated
(projected) token is picked up without a restart.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import ConfigException, load_kube_config
from yarl import URL

JSON = dict[str, Any]

IN_CLUSTER_TOKEN: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
IN_CLUSTER_CA: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
# kubelet refreshes a projected token well before it expires; a minute is what client-go waits.
TOKEN_REREAD_SECONDS: Final = 60.0
# An ordinary request that takes longer than this is treated as failed and retried by its caller.
REQUEST_SECONDS: Final = 30.0

JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"


class KubeError(Exception):
    """Talking to the API server failed."""


class Unreachable(KubeError):
    """The API server could not be reached, or did not answer in time."""


class ConfigurationError(KubeError):
    """No usable way to connect: the kubeconfig, token or CA file is missing or broken."""


class ApiError(KubeError):
    """The API server answered with an error status."""

    def __init__(self, status: int, reason: str, message: str, detail: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}" if reason else f"{status}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.detail = detail or message
        """The API server's own words, without the request they answer."""

    @classmethod
    def from_status(cls, status: int, raw: Mapping[str, Any] | bytes, where: str) -> ApiError:
        """From a ``Status`` object (a response body, or the object of a watch ERROR event)."""
        body: object = raw
        if isinstance(raw, bytes):
            try:
                body = json.loads(raw)
            except ValueError:
                return cls(status, "", f"{where}: {raw[:200].decode(errors='replace')}")
        if not isinstance(body, Mapping):
            return cls(status, "", f"{where}: {body!r}")
        code = body.get("code")
        words = str(body.get("message") or body)
        return cls(
            code if isinstance(code, int) and code else status,
            str(body.get("reason") or ""),
            f"{where}: {words}",
            words,
        )

    @property
    def gone(self) -> bool:
        """410: the resourceVersion is too old to watch from; relist."""
        return self.status == 410

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def retriable(self) -> bool:
        """Worth trying again later: throttled, or the server's own trouble."""
        return self.status == 429 or self.status >= 500


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """How to reach the API server. Empty fields fall through to the next way of connecting."""

    kubeconfig: str = ""
    context: str = ""
    server: str = ""
    token_file: str = ""
    ca_file: str = ""

    def describe(self) -> str:
        if self.kubeconfig:
            return f"kubeconfig {self.kubeconfig}"
        if self.server:
            return f"{self.server} with the token in {self.token_file}"
        return "the in-cluster service account"


class _TokenFile:
    """A bearer token read from a file, read again once it is older than a minute."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.read_at = 0.0

    def refresh(self, configuration: Configuration) -> None:
        now = time.monotonic()
        if now - self.read_at < TOKEN_REREAD_SECONDS:
            return
        token = self.path.read_text().strip()
        if not token:
            raise ConfigurationError(f"token file {self.path} is empty")
        configuration.api_key["BearerToken"] = f"Bearer {token}"
        self.read_at = now


def _settle_proxy(api: ApiClient) -> None:
    """Look the proxy up once, not per request.

    kubernetes_asyncio's session trusts the environment, and aiohttp then reads the proxy
    variables and ``~/.netrc`` in a worker thread for every request: two thread hops that cost a
    busy controller milliseconds per gate removal. The server's address does not change, so the
    proxy the environment names for it (if any) is fixed here and the per-request lookups are
    turned off. Credentials never come from ``.netrc`` (a token or a client certificate does).
    """
    rest = api.rest_client
    try:
        proxy, _ = get_env_proxy_for_url(URL(str(api.configuration.host)))
    except LookupError:
        proxy = None
    if proxy is not None and not rest.proxy:
        rest.proxy = str(proxy)
    rest.pool_manager._trust_env = False


class Connection:
    """An authenticated session with one API server. Close it (or use ``async with``)."""

    def __init__(self, api: ApiClient, user_agent: str) -> None:
        self._api = api
        self._api.user_agent = user_agent
        self.user_agent = user_agent
        _settle_proxy(api)

    @property
    def server(self) -> str:
        return str(self._api.configuration.host)

    # --- opening --------------------------------------------------------------------------

    @classmethod
    async def open(cls, settings: ConnectionSettings, *, user_agent: str) -> Connection:
        if settings.kubeconfig:
            return await cls.from_kubeconfig(Path(settings.kubeconfig), user_agent=user_agent,
                                             context=settings.context)
        if settings.server:
            if not settings.token_file or not settings.ca_file:
                raise ConfigurationError("a server URL needs a token file and a CA file")
            return cls.from_token_file(settings.server, Path(settings.token_file), Path(settings.ca_file),
                                       user_agent=user_agent)
        return cls.in_cluster(user_agent=user_agent)

    @classmethod
    async def from_kubeconfig(cls, path: Path, *, user_agent: str, context: str = "") -> Connection:
        configuration = Configuration()
        try:
            await load_kube_config(config_file=str(path), context=context or None,
                                   client_configuration=configuration, persist_config=False)
        except (ConfigException, OSError, ValueError) as e:
            raise ConfigurationError(f"kubeconfig {path}: {e}") from e
        return cls(ApiClient(configuration), user_agent)

    @classmethod
    def from_token_file(cls, server: str, token_file: Path, ca_file: Path, *, user_agent: str) -> Connection:
        for what, path in (("token", token_file), ("CA", ca_file)):
            if not path.is_file():
                raise ConfigurationError(f"{what} file {path} does not exist")
        configuration = Configuration(host=server.rstrip("/"))
        configuration.ssl_ca_cert = str(ca_file)
        token = _TokenFile(token_file)
        token.refresh(configuration)
        configuration.refresh_api_key_hook = token.refresh
        return cls(ApiClient(configuration), user_agent)

    @classmethod
    def in_cluster(cls, *, user_agent: str) -> Connection:
        host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
        if not host or not port:
            raise ConfigurationError(
                "not running in a cluster (KUBERNETES_SERVICE_HOST/PORT unset) and no kubeconfig "
                "or server given"
            )
        if ":" in host:  # an IPv6 address
            host = f"[{host}]"
        return cls.from_token_file(f"https://{host}:{port}", IN_CLUSTER_TOKEN, IN_CLUSTER_CA,
                                   user_agent=user_agent)

    async def close(self) -> None:
        await self._api.close()

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- requests -------------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None,
        body: Any,
        content_type: str,
        timeout: float | aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        try:
            response: aiohttp.ClientResponse = await self._api.call_api(
                path, method,
                query_params=list(query.items()) if query else None,
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
        except (aiohttp.ClientError, TimeoutError) as e:
            raise Unreachable(f"{method} {path}: {type(e).__name__}: {e}") from e
        except (ConfigException, OSError) as e:
            raise ConfigurationError(f"{method} {path}: {e}") from e
        return response

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = REQUEST_SECONDS,
    ) -> JSON:
        """One request; the answer's JSON object. Error statuses raise ``ApiError``."""
        response = await self._send(method, path, query, body, content_type, timeout)
        where = f"{method} {path}"
        try:
            async with response:
                data = await response.read()
        except (aiohttp.ClientError, TimeoutError) as e:
            raise Unreachable(f"{where}: {type(e).__name__}: {e}") from e
        if response.status >= 400:
            raise ApiError.from_status(response.status, data, where)
        try:
            out = json.loads(data) if data else {}
        except ValueError as e:
            raise KubeError(f"{where}: the answer is not JSON: {e}") from e
        if not isinstance(out, dict):
            raise KubeError(f"{where}: the answer is not a JSON object")
        return out

    async def get(self, path: str, query: Mapping[str, str] | None = None) -> JSON:
        return await self.request("GET", path, query=query)

    async def stream(
        self, path: str, query: Mapping[str, str], *, idle_seconds: float
    ) -> AsyncGenerator[JSON, None]:
        """The events of a watch, one JSON object per line, until the server ends it.

        ``idle_seconds`` bounds the wait for the next line: a connection that goes silent for
        longer (no event, no bookmark) is treated as broken.
        """
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=REQUEST_SECONDS, sock_read=idle_seconds)
        response = await self._send("GET", path, query, None, "application/json", timeout)
        where = f"watch {path}"
        try:
            async with response:
                if response.status >= 400:
                    raise ApiError.from_status(response.status, await response.read(), where)
                async for line in response.content:
                    if not line.strip():
                        continue
                    try:
                        event = json.loads(line)
                    except ValueError as e:
                        raise KubeError(f"{where}: an event is not JSON: {e}") from e
                    if not isinstance(event, dict):
                        raise KubeError(f"{where}: an event is not a JSON object")
                    yield event
        except (aiohttp.ClientError, TimeoutError) as e:
            raise Unreachable(f"{where}: {type(e).__name__}: {e}") from e
        except ValueError as e:  # aiohttp: a line longer than its buffer
            raise KubeError(f"{where}: {e}") from e
