"""One-shot reads for a command-line client: the user's kubeconfig, and whole lists.

The processes keep reflectors (list once, then watch); a command reads once and exits, so it
needs only what is here: a connection opened as ``kubectl`` opens it (``--kubeconfig``, else
``$KUBECONFIG`` with its ``:``-separated files merged, else ``~/.kube/config``; ``--context``,
else the current context) with the namespace that context names, and lists read page by page
so that a cluster of 100,000 pods never arrives as one answer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import ConfigException, load_kube_config

from kube.connecting import JSON, ConfigurationError, Connection, KubeError
from kube.resources import Resource

DEFAULT_KUBECONFIG: Final = "~/.kube/config"
# Items per page: what kubectl asks for (its --chunk-size default).
PAGE: Final = 500


def kubeconfig_files(flag: str = "", environ: Mapping[str, str] | None = None) -> str:
    """The kubeconfig to read, as kubectl chooses it: the flag, else ``$KUBECONFIG`` (files
    separated by ``:``, merged), else ``~/.kube/config``."""
    env = os.environ if environ is None else environ
    return flag or env.get("KUBECONFIG", "") or DEFAULT_KUBECONFIG


@dataclass(frozen=True, slots=True)
class UserConnection:
    """A connection as the user, and the namespace their context names (``default`` if none)."""

    connection: Connection
    namespace: str
    context: str


async def open_as_user(kubeconfig: str = "", context: str = "", *, user_agent: str) -> UserConnection:
    """Open a connection with the user's own kubeconfig (see ``kubeconfig_files``)."""
    files = kubeconfig_files(kubeconfig)
    if not any(os.path.exists(os.path.expanduser(p)) for p in files.split(os.pathsep) if p):
        raise ConfigurationError(f"no kubeconfig found at {files} (set --kubeconfig or KUBECONFIG)")
    configuration = Configuration()
    try:
        loader = await load_kube_config(config_file=files, context=context or None,
                                        client_configuration=configuration, persist_config=False)
    except (ConfigException, OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigurationError(f"kubeconfig {files}: {e}") from e
    current = _plain(loader.current_context)
    name = str(current.get("name") or context)
    found = _plain(current.get("context")).get("namespace")
    namespace = found if isinstance(found, str) and found else "default"
    return UserConnection(Connection(ApiClient(configuration), user_agent), namespace, name)


def _plain(node: object) -> Mapping[str, object]:
    """A kubeconfig entry as a mapping (kubernetes_asyncio wraps some in its ConfigNode)."""
    value = getattr(node, "value", node)
    return value if isinstance(value, Mapping) else {}


async def list_all(
    connection: Connection,
    resource: Resource,
    *,
    namespace: str = "",
    label_selector: str = "",
    field_selector: str = "",
) -> list[JSON]:
    """Every item of a list, read page by page (a namespaced resource without ``namespace``:
    across all namespaces). Raises ``KubeError`` (``ApiError`` for a refusal)."""
    items: list[JSON] = []
    query: dict[str, str] = {"limit": str(PAGE)}
    if label_selector:
        query["labelSelector"] = label_selector
    if field_selector:
        query["fieldSelector"] = field_selector
    path = resource.path(namespace=namespace)
    while True:
        page = await connection.get(path, query)
        found = page.get("items") or []
        if not isinstance(found, list):
            raise KubeError(f"GET {path}: items is not a list")
        items.extend(i for i in found if isinstance(i, dict))
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items
        query["continue"] = str(token)
