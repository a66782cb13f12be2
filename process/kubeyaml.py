"""YAML that every reader takes the same way: PyYAML, kubectl, and Kubernetes' own Go tools.

PyYAML writes by YAML 1.1's rules; kubectl and the Kubernetes tools read with Go's readers
(sigs.k8s.io/yaml over go-yaml v2, and go-yaml v3), close to YAML 1.2's core schema with
extras of their own. A string written plain is only a string if its reader resolves it as one,
and PyYAML quotes only what YAML 1.1 would misread: ``8e51``, ``1_000``, ``0o17`` stay plain,
and kubectl reads them as numbers, so a label value or a name that happens to look like one is
refused ("cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type
string"); go-yaml v2 also reads a plain ``y`` or ``n`` as a boolean.

``dump`` and ``dump_all`` quote, beyond what PyYAML quotes, every string that any of these
readers could take for a number, a boolean or null (``needs_quotes``): whatever starts like a
number (a digit, or a sign, a dot or Go's ignored underscores before one) and the words that
some reader resolves (``y``, ``no``, ``On``, ``TRUE``, ``~``, ``null``, ``.inf``, ``.NaN``,
``<<``...), in any letter case. Quoting a string that did not need it changes nothing for any
reader; leaving one plain that did breaks an object at random, whenever a generated id
happens to be all digits or digits around one ``e``. Everything the project writes for
Kubernetes or for kubectl goes through here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

import yaml

STR_TAG: Final = "tag:yaml.org,2002:str"
# Resolved as booleans, null, merge keys, infinities or NaN by at least one reader: YAML 1.1
# (y|n|yes|no|on|off|true|false, ~|null, <<, =), YAML 1.2's core schema, go-yaml v2 and v3.
WORDS: Final = frozenset({
    "y", "n", "yes", "no", "on", "off", "true", "false", "~", "null", "<<", "=",
    ".inf", "+.inf", "-.inf", ".nan",
})
# Go's readers drop every "_" before parsing a number ("-_1" is -1 to them), so the test is
# made on the string without them: a sign, then a digit, or a dot and a digit.
NUMBER_LIKE: Final = re.compile(r"[-+]?\.?[0-9]")


def needs_quotes(text: str) -> bool:
    """Whether some YAML reader could resolve ``text``, written plain, as anything but a string."""
    return text == "" or text.lower() in WORDS or NUMBER_LIKE.match(text.replace("_", "")) is not None


class Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, with strings quoted wherever any reader might misread them."""


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    if needs_quotes(text):
        # Single quotes, as PyYAML quotes '123'; the emitter switches to double quotes when a
        # string cannot be single-quoted (control characters).
        return dumper.represent_scalar(STR_TAG, text, style="'")
    return dumper.represent_str(text)


Dumper.add_representer(str, _represent_str)


def dump(data: Any, *, sort_keys: bool = True, allow_unicode: bool = False) -> str:
    """One YAML document, as ``yaml.safe_dump`` writes it but safe for every reader."""
    return str(yaml.dump(data, Dumper=Dumper, sort_keys=sort_keys, allow_unicode=allow_unicode))


def dump_all(documents: Iterable[Any], *, sort_keys: bool = True, allow_unicode: bool = False) -> str:
    """Several documents separated by ``---``, as ``yaml.safe_dump_all`` writes them."""
    return str(yaml.dump_all(documents, Dumper=Dumper, sort_keys=sort_keys, allow_unicode=allow_unicode))
