"""How the YAML readers other than PyYAML resolve a plain scalar, restated for tests.

kubectl and the Kubernetes tools read YAML with Go's readers: sigs.k8s.io/yaml over go-yaml v2
(``go.yaml.in/yaml/v2`` 2.4.3, resolve.go) and go-yaml v3 (3.0.4); others follow YAML 1.2's
core schema (section 10.3.2 of the spec). ``non_string(text)`` names what any of them makes of
``text`` written plain when it is not a string; ``misread(document)`` lists every plain scalar
of a YAML text that some reader takes for something else. PyYAML (YAML 1.1) needs no
restating: tests read the text back with ``yaml.safe_load``.

Restated from the sources, not from the dumper under test, so that the two can disagree.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

import yaml

# YAML 1.2 core schema.
CORE_NULL: Final = re.compile(r"null|Null|NULL|~|")
CORE_BOOL: Final = re.compile(r"true|True|TRUE|false|False|FALSE")
CORE_INT: Final = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")
CORE_FLOAT: Final = re.compile(
    r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?(\.inf|\.Inf|\.INF)|\.nan|\.NaN|\.NAN"
)

# go-yaml v2 and v3: the words of their resolve tables (v3 keeps only true/false of the bools).
GO_WORDS: Final = {
    **dict.fromkeys(["y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"], "bool"),
    **dict.fromkeys(["n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"], "bool"),
    **dict.fromkeys(["", "~", "null", "Null", "NULL"], "null"),
    **dict.fromkeys([".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF",
                     "-.inf", "-.Inf", "-.INF"], "float"),
    "<<": "merge",
}
# Their yamlStyleFloat, matched after removing every "_".
GO_FLOAT: Final = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
# parseTimestamp: four digits and "-" first, then one of time.Parse's layouts "2006-1-2",
# "2006-1-2 15:4:5.999999999", "2006-1-2T15:4:5.999999999Z07:00" (a little wider here).
GO_TIMESTAMP: Final = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ][0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}.*)?")
DIGITS: Final = "0123456789abcdef"


def go_parse_int(text: str, *, signed: bool) -> bool:
    """Whether Go's ``strconv.ParseInt(text, 0, 64)`` (``signed``) or ``ParseUint`` accepts
    ``text``: an optional sign (ParseInt only), then ``0b``/``0o``/``0x`` in either case, or
    a leading ``0`` for octal, or decimal; in range of int64 or uint64."""
    negative = False
    if signed and text[:1] in ("+", "-"):
        negative, text = text[0] == "-", text[1:]
    if not text:
        return False
    base = 10
    if text[0] == "0":
        if len(text) >= 3 and text[1].lower() in "box":
            base, text = {"b": 2, "o": 8, "x": 16}[text[1].lower()], text[2:]
        else:
            base, text = 8, text[1:]
    if any(c.lower() not in DIGITS[:base] for c in text):
        return False
    value = int(text, base) if text else 0
    if not signed:
        return value < 2**64
    return value <= 2**63 if negative else value < 2**63


def _go_prefixed(plain: str, prefix: str, base: int) -> bool:
    """go-yaml's own ``0b``/``-0b`` (and v3's ``0o``/``-0o``) forms, lower case only."""
    for sign in ("", "-"):
        if plain.startswith(sign + prefix):
            digits = plain[len(sign + prefix):]
            return bool(digits) and all(c in DIGITS[:base] for c in digits)
    return False


def go_tag(text: str) -> str:
    """What go-yaml v2 or v3 resolves ``text`` (a plain scalar) to: "str" unless either of them
    resolves it to something else."""
    if text in GO_WORDS:
        return GO_WORDS[text]
    hint = text[:1]
    if hint == ".":
        return "float" if GO_FLOAT.fullmatch(text) else "str"
    if hint and hint in "+-0123456789":
        if GO_TIMESTAMP.fullmatch(text):
            return "timestamp"
        plain = text.replace("_", "")
        if go_parse_int(plain, signed=True) or go_parse_int(plain, signed=False):
            return "int"
        if GO_FLOAT.fullmatch(plain):
            return "float"
        if _go_prefixed(plain, "0b", 2) or _go_prefixed(plain, "0o", 8):
            return "int"
    return "str"


def core_tag(text: str) -> str:
    """What YAML 1.2's core schema resolves ``text`` (a plain scalar) to."""
    for tag, pattern in (("null", CORE_NULL), ("bool", CORE_BOOL), ("int", CORE_INT), ("float", CORE_FLOAT)):
        if pattern.fullmatch(text):
            return tag
    return "str"


def non_string(text: str) -> str | None:
    """What some reader other than PyYAML takes ``text``, written plain, for, if not a string."""
    for reader, tag in (("YAML 1.2 core", core_tag(text)), ("go-yaml", go_tag(text))):
        if tag != "str":
            return f"{reader}: {tag}"
    return None


def _plain_scalars(node: yaml.Node) -> Iterator[str]:
    if isinstance(node, yaml.ScalarNode):
        if node.style is None:  # written plain: the reader resolves it
            yield str(node.value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _plain_scalars(item)
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield from _plain_scalars(key)
            yield from _plain_scalars(value)


def misread(document: str) -> list[tuple[str, str]]:
    """Every plain scalar of ``document`` (one or more YAML documents) that a YAML 1.2 core or
    Go reader resolves as something other than a string, with what it makes of it."""
    found = []
    for node in yaml.compose_all(document, Loader=yaml.SafeLoader):
        for text in _plain_scalars(node):
            what = non_string(text)
            if what is not None:
                found.append((text, what))
    return found


# Strings that some reader takes for a number, a boolean or null: the run id that broke a
# test ("8e51"), and one of every form the readers resolve.
MISREAD_AS_OTHER: Final = (
    "8e51", "1e3", "0x1F", "0o17", "1_000", ".inf", "on", "NO", "~", "null", "True", "012",
    "y", "N", "Off", "yes", "FALSE", "-.Inf", ".NaN", "<<", "0b101", "-0b1", "0O17", "0X1f",
    "+1", "-_1", "1.", ".5", "09", "1e999", "18446744073709551615", "99999999999999999999",
    "2001-12-14", "2001-12-14t21:59:43.10-05:00", "1:20", "190:20:30.15", "12345678", "0",
)
