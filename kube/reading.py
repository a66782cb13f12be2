"""One-shot reads for a command-line client: the user's kubeconfig, and whole lists.

The processes keep reflectors (list once, then watch); a command reads once and exits, so it
needs only what is here: a connection opened as ``kubectl`` opens it (``--kubeconfig``, else
``$KUBECONFIG`` with its ``:``-separated files merged, else ``~/.kube/config``; ``--context``,
else the current context) with the namespace that context names, and lists read page by page
so that a cluster of 100,000 pods never arrives as one answer.

The user entry's impersonation (``as``, ``as-uid``, ``as-groups``) is honoured as kubectl
honours it, with the ``Impersonate-*`` headers on every request; what cannot be sent that way
(several groups, ``as-user-extra``) is refused in one line rather than silently dropped, since
a kubeconfig that drops privileges must never read with the privileges it meant to drop. A
kubeconfig that is not valid YAML, is empty, or is not a mapping is one line too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import yaml
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
    for path in files.split(os.pathsep):
        check_kubeconfig(os.path.expanduser(path))
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
    api = ApiClient(configuration)
    for header, value in impersonation(_plain(getattr(loader, "_user", None)), files).items():
        api.set_default_header(header, value)
    return UserConnection(Connection(api, user_agent), namespace, name)


def check_kubeconfig(path: str) -> None:
    """Raise ``ConfigurationError`` in one line when the file at ``path`` (if any) cannot be a
    kubeconfig: not YAML, empty, or not a mapping."""
    if not path or not os.path.exists(path) or os.path.isdir(path):
        return  # the loader says what is missing
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigurationError(f"kubeconfig {path}: not valid YAML{where}") from e
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigurationError(f"kubeconfig {path}: not valid YAML") from e
    if data is None:
        raise ConfigurationError(f"kubeconfig {path}: is empty")
    if not isinstance(data, dict):
        raise ConfigurationError(f"kubeconfig {path}: is not a kubeconfig (not a mapping)")


def impersonation(user: Mapping[str, object], where: str) -> dict[str, str]:
    """The ``Impersonate-*`` headers a kubeconfig user entry asks for (``as``, ``as-uid``,
    ``as-groups``); ``ConfigurationError`` for what one header each cannot carry."""
    headers: dict[str, str] = {}
    who = user.get("as")
    if who:
        headers["Impersonate-User"] = str(who)
    uid = user.get("as-uid")
    if uid:
        headers["Impersonate-Uid"] = str(uid)
    raw = user.get("as-groups")
    groups = [str(g) for g in raw] if isinstance(raw, list) else ([str(raw)] if raw else [])
    if len(groups) > 1:
        raise ConfigurationError(f"kubeconfig {where}: impersonating several groups (as-groups) is not "
                                 "supported; use kubectl, or a kubeconfig with one group")
    if groups:
        headers["Impersonate-Group"] = groups[0]
    if user.get("as-user-extra"):
        raise ConfigurationError(f"kubeconfig {where}: as-user-extra is not supported; use kubectl")
    if headers and "Impersonate-User" not in headers:
        raise ConfigurationError(f"kubeconfig {where}: as-groups or as-uid without as "
                                 "(the user to impersonate)")
    return headers


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
