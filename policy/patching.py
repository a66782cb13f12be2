"""JSON patches (RFC 6902): building the smallest one between two documents, and applying one.

Admission computes the pod it wants and ``diff`` turns "from this to that" into the patch the
API server applies. Paths are JSON pointers (RFC 6901): ``~`` and ``/`` in keys are escaped,
which matters because label keys such as ``sluicegate.dev/queue`` contain a slash.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict

from policy.merging import thaw

Op = Literal["add", "remove", "replace", "test", "move", "copy"]

PatchOp = TypedDict(
    "PatchOp",
    {"op": Op, "path": str, "value": NotRequired[Any], "from": NotRequired[str]},
)
"""One RFC 6902 operation, as it goes on the wire."""

Patch = tuple[PatchOp, ...]


class PatchError(ValueError):
    """A patch does not apply to a document (a missing path, a failed test)."""


def escape(key: str) -> str:
    """One reference token of a JSON pointer: ``~`` becomes ``~0``, ``/`` becomes ``~1``."""
    return key.replace("~", "~0").replace("/", "~1")


def unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def pointer(*tokens: str | int) -> str:
    """A JSON pointer from unescaped tokens: ``pointer("metadata", "labels", "a/b")``."""
    return "".join("/" + escape(str(t)) for t in tokens)


def diff(before: Any, after: Any, path: str = "") -> Patch:
    """A patch that turns ``before`` into ``after``, touching only what differs.

    Objects are compared key by key, so a missing map is added whole and an existing one gains
    only its new keys. Lists are compared item by item while both have items; items appended at
    the end are added with ``/-``; a list that shrank is replaced whole.
    """
    return tuple(_diff(before, after, path))


def _diff(before: Any, after: Any, path: str) -> Iterable[PatchOp]:
    if _same(before, after):
        return
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key in before:
            if key not in after:
                yield {"op": "remove", "path": path + "/" + escape(str(key))}
        for key, value in after.items():
            at = path + "/" + escape(str(key))
            if key in before:
                yield from _diff(before[key], value, at)
            else:
                yield {"op": "add", "path": at, "value": thaw(value)}
        return
    if isinstance(before, list) and isinstance(after, list) and len(after) >= len(before):
        for i, value in enumerate(before):
            yield from _diff(value, after[i], f"{path}/{i}")
        for value in after[len(before):]:
            yield {"op": "add", "path": path + "/-", "value": thaw(value)}
        return
    yield {"op": "replace", "path": path, "value": thaw(after)}


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON: unlike Python's ``==``, ``True`` is not ``1`` and ``1.0`` is not ``1``."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


# --- applying -------------------------------------------------------------------------------


def apply(document: Any, patch: Sequence[PatchOp]) -> Any:
    """``document`` with ``patch`` applied, as a new plain document; the input is untouched.

    Supports every RFC 6902 operation; raises ``PatchError`` when an operation cannot apply.
    """
    doc = thaw(document)
    for op in patch:
        doc = _apply_one(doc, op)
    return doc


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"{path!r} is not a JSON pointer")
    return [unescape(t) for t in path[1:].split("/")]


def _get(doc: Any, tokens: list[str], path: str) -> Any:
    node = doc
    for token in tokens:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise PatchError(f"path {path} does not exist")
    return node


def _add(doc: Any, tokens: list[str], value: Any, path: str) -> Any:
    if not tokens:
        return value
    parent = _get(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise PatchError(f"path {path}: index out of range")
    else:
        raise PatchError(f"path {path}: parent is not an object or a list")
    return doc


def _remove(doc: Any, tokens: list[str], path: str) -> tuple[Any, Any]:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _get(doc, tokens[:-1], path)
    removed = _get(parent, tokens[-1:], path)
    if isinstance(parent, dict):
        del parent[tokens[-1]]
    else:
        del parent[int(tokens[-1])]
    return doc, removed


def _apply_one(doc: Any, op: PatchOp) -> Any:
    path = op["path"]
    tokens = _tokens(path)
    kind = op["op"]
    if kind == "add":
        return _add(doc, tokens, thaw(op["value"]), path)
    if kind == "remove":
        return _remove(doc, tokens, path)[0]
    if kind == "replace":
        _get(doc, tokens, path)
        if not tokens:
            return thaw(op["value"])
        doc, _ = _remove(doc, tokens, path)
        return _add(doc, tokens, thaw(op["value"]), path)
    if kind == "test":
        if _get(doc, tokens, path) != op["value"]:
            raise PatchError(f"test failed at {path}")
        return doc
    source = _tokens(op["from"])
    if kind == "move":
        doc, value = _remove(doc, source, op["from"])
        return _add(doc, tokens, value, path)
    if kind == "copy":
        return _add(doc, tokens, thaw(_get(doc, source, op["from"])), path)
    raise PatchError(f"unknown operation {kind!r}")
