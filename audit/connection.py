"""The auditor's own connection to the API server: aiohttp, authenticated from a kubeconfig.

Independent of ``kube/`` (kubernetes_asyncio) on purpose: the auditor judges the controller,
so it must not share the controller's client or its bugs. It speaks plain HTTP/1.1 with
keep-alive over a bounded pool of connections (aiohttp has no HTTP/2 client); each request
holds one connection while it runs, so the pool size is the request concurrency.

Credentials come from a kubeconfig's client certificate and key (files or base64 data) with
its CA, or from a bearer token (``token`` or ``tokenFile``). Exec plugins and auth providers
are not supported: the auditor runs against clusters whose admin it is.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

import aiohttp
import yaml

from process import kubeyaml

Obj = dict[str, Any]
PatchKind = Literal["json", "merge", "strategic"]
PATCH_TYPES: Mapping[str, str] = {
    "json": "application/json-patch+json",
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}
DEFAULT_USER_AGENT = "sluicegate-audit"


class CredentialsError(Exception):
    """A kubeconfig the auditor cannot use."""


class ApiError(Exception):
    """The API server answered a request with an error status."""

    def __init__(self, method: str, path: str, status: int, reason: str, message: str) -> None:
        super().__init__(f"{method} {path}: {status} {reason}: {message}")
        self.method = method
        self.path = path
        self.status = status
        self.reason = reason
        self.message = message


@dataclass(frozen=True, slots=True)
class Credentials:
    """Where the API server is and how to prove who we are."""

    server: str
    ca_pem: bytes | None = None
    """None: the system's trust store."""
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    token: str | None = None
    insecure: bool = False

    @classmethod
    def from_kubeconfig(cls, path: Path | str, context: str | None = None) -> Credentials:
        path = Path(path)
        try:
            config: Obj = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise CredentialsError(f"cannot read kubeconfig {path}: {e}") from e
        base = path.parent
        name = context or config.get("current-context")
        ctx = _named(config, "contexts", name, "context", path)
        cluster = _named(config, "clusters", ctx.get("cluster"), "cluster", path)
        user = _named(config, "users", ctx.get("user"), "user", path) if ctx.get("user") else {}
        if "exec" in user or "auth-provider" in user:
            raise CredentialsError(f"{path}: exec plugins and auth providers are not supported")
        token = user.get("token")
        if not token and user.get("tokenFile"):
            token = _read(base, user["tokenFile"]).decode().strip()
        return cls(
            server=str(cluster.get("server", "")).rstrip("/"),
            ca_pem=_data_or_file(cluster, "certificate-authority", base),
            cert_pem=_data_or_file(user, "client-certificate", base),
            key_pem=_data_or_file(user, "client-key", base),
            token=token or None,
            insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        )

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif self.ca_pem is not None:
            context = ssl.create_default_context(cadata=self.ca_pem.decode())
        if self.cert_pem is not None and self.key_pem is not None:
            # ssl loads a certificate chain only from files: write them privately, load, remove.
            with tempfile.TemporaryDirectory(prefix="audit-tls-") as tmp:
                cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
                for file, data in ((cert, self.cert_pem), (key, self.key_pem)):
                    file.touch(mode=0o600)
                    file.write_bytes(data)
                context.load_cert_chain(cert, key)
        return context

    def kubeconfig(self, name: str = "audit") -> Obj:
        """A self-contained kubeconfig with these credentials (for another process)."""

        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        cluster: Obj = {"server": self.server}
        if self.ca_pem is not None:
            cluster["certificate-authority-data"] = b64(self.ca_pem)
        if self.insecure:
            cluster["insecure-skip-tls-verify"] = True
        user: Obj = {}
        if self.cert_pem is not None and self.key_pem is not None:
            user["client-certificate-data"] = b64(self.cert_pem)
            user["client-key-data"] = b64(self.key_pem)
        if self.token:
            user["token"] = self.token
        return {
            "apiVersion": "v1", "kind": "Config", "current-context": name,
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": name, "user": user}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        }

    def write_kubeconfig(self, path: Path, name: str = "audit") -> Path:
        path.touch(mode=0o600)
        path.write_text(kubeyaml.dump(self.kubeconfig(name), sort_keys=False))
        return path


def _named(config: Obj, section: str, name: object, field: str, path: Path) -> Obj:
    for item in config.get(section) or ():
        if item.get("name") == name:
            found: Obj = item.get(field) or {}
            return found
    raise CredentialsError(f"{path}: no {section[:-1]} named {name!r}")


def _read(base: Path, file: str) -> bytes:
    try:
        return (base / os.path.expanduser(file)).read_bytes()
    except OSError as e:
        raise CredentialsError(f"cannot read {file}: {e}") from e


def _data_or_file(section: Obj, key: str, base: Path) -> bytes | None:
    if section.get(f"{key}-data"):
        return base64.b64decode(section[f"{key}-data"])
    if section.get(key):
        return _read(base, section[key])
    return None


class Connection:
    """A pool of keep-alive connections to one API server. Use ``async with``."""

    def __init__(
        self,
        credentials: Credentials,
        *,
        user_agent: str = DEFAULT_USER_AGENT,
        connections: int = 16,
        timeout: float = 30.0,
    ) -> None:
        self.credentials = credentials
        self.user_agent = user_agent
        self.connections = connections
        self.timeout = timeout
        self.requests = 0
        """Requests sent, as this client counts them (the API server's count is in ``scraping``)."""
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        headers = {"User-Agent": self.user_agent, "Accept": "application/json"}
        if self.credentials.token:
            headers["Authorization"] = f"Bearer {self.credentials.token}"
        connector = aiohttp.TCPConnector(
            ssl=self.credentials.ssl_context(), limit=self.connections, keepalive_timeout=60
        )
        self._session = aiohttp.ClientSession(
            base_url=self.credentials.server, connector=connector, headers=headers,
            timeout=aiohttp.ClientTimeout(total=self.timeout),
        )
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("the connection is not open: use `async with Connection(...)`")
        return self._session

    async def request(
        self, method: str, path: str, *, params: Mapping[str, str] | None = None,
        body: object = None, content_type: str = "application/json",
    ) -> Obj:
        self.requests += 1
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type} if data is not None else None
        async with self.session.request(method, path, params=params, data=data, headers=headers) as response:
            text = await response.text()
            if response.status >= 400:
                raise _error(method, path, response.status, text)
            result: Obj = json.loads(text) if text else {}
            return result

    async def get(self, path: str, **params: str) -> Obj:
        return await self.request("GET", path, params=params or None)

    async def text(self, path: str) -> str:
        """A plain-text answer, such as ``/metrics``."""
        self.requests += 1
        async with self.session.get(path, headers={"Accept": "text/plain"}) as response:
            text = await response.text()
            if response.status >= 400:
                raise _error("GET", path, response.status, text)
            return text

    async def create(self, path: str, body: Obj) -> Obj:
        return await self.request("POST", path, body=body)

    async def patch(self, path: str, body: object, kind: PatchKind = "json") -> Obj:
        return await self.request("PATCH", path, body=body, content_type=PATCH_TYPES[kind])

    async def delete(self, path: str, **params: str) -> Obj:
        return await self.request("DELETE", path, params=params or None)

    async def stream(
        self, path: str, params: Mapping[str, str], *, read_timeout: float | None = None
    ) -> AsyncIterator[Obj]:
        """The objects of a streamed answer (a watch), one JSON document per line. A stream
        silent for ``read_timeout`` seconds fails with TimeoutError (a server gone mute)."""
        self.requests += 1
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout, sock_read=read_timeout)
        async with self.session.get(path, params=params, timeout=timeout) as response:
            if response.status >= 400:
                raise _error("GET", path, response.status, await response.text())
            pending = b""
            async for chunk in response.content.iter_any():
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)


def _error(method: str, path: str, status: int, text: str) -> ApiError:
    try:
        data = json.loads(text)
        return ApiError(method, path, status, data.get("reason", ""), data.get("message", text))
    except (ValueError, AttributeError):
        return ApiError(method, path, status, "", text.strip()[:500])
