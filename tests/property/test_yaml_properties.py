"""The YAML the project writes for Kubernetes (``process.kubeyaml``) gives every string back as a
string, to PyYAML (YAML 1.1) and to the YAML 1.2 core schema and Go's readers that kubectl and
the Kubernetes tools use (restated in ``tests/yaml_readers.py``).

A string that one reader takes for a number, a boolean or null broke a test at random: a run
id went into a label value, PyYAML wrote ``8e51`` plain, and kubectl read a float.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from process import kubeyaml
from tests.yaml_readers import MISREAD_AS_OTHER, misread, non_string

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEWER = settings(SETTINGS, max_examples=80)


def _cased(word: str, upper: list[bool]) -> str:
    return "".join(c.upper() if up else c for c, up in zip(word, upper + [False] * len(word), strict=False))


words = st.builds(
    _cased,
    st.sampled_from(["y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", "<<", "=",
                     ".inf", "+.inf", "-.inf", ".nan"]),
    st.lists(st.booleans(), max_size=6),
)
number_like = st.one_of(
    st.from_regex(r"[-+]?_?[0-9][0-9_]{0,6}(\.[0-9_]{0,4})?([eE][-+]?[0-9]{1,4})?", fullmatch=True),
    st.from_regex(r"[-+]?_?0[bBoOxX][0-9a-fA-F_]{0,8}", fullmatch=True),
    st.from_regex(r"[-+]?\.[0-9]{1,4}([eE][-+]?[0-9]{1,3})?", fullmatch=True),
    st.from_regex(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ][0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?)?",
                  fullmatch=True),
    st.from_regex(r"[-+]?[0-9]{1,3}(:[0-5]?[0-9]){1,2}(\.[0-9]*)?", fullmatch=True),
)
run_ids = st.text("0123456789abcdef", min_size=1, max_size=10)  # uuid4().hex[:n], as tests make them
near_numbers = st.text("0123456789+-._eExXoObB:~ny", max_size=8)
strings = st.one_of(st.sampled_from(MISREAD_AS_OTHER), words, number_like, run_ids, near_numbers, st.text())
mappings = st.dictionaries(strings, st.one_of(strings, st.lists(strings, max_size=3)), max_size=8)


def assert_strings_come_back(data: Any, text: str, loaded: Any) -> None:
    assert loaded == data, f"PyYAML read back something else from:\n{text}"
    assert misread(text) == [], f"written plain, read as something other than a string:\n{text}"


def pyyaml_reads_plain_as_string(text: str) -> bool:
    try:
        return isinstance(yaml.safe_load(f"key: {text}\n")["key"], str)
    except yaml.YAMLError:  # "<<" alone: a merge key with nothing to merge
        return False


@SETTINGS
@given(mappings)
@example({"8e51": "8e51"})
@example({"sluicegate.dev/run": "12345e67", "name": "0x1F"})
def test_every_string_written_reads_back_as_the_same_string_in_every_reader(data: dict[str, Any]) -> None:
    text = kubeyaml.dump(data)
    assert_strings_come_back(data, text, yaml.safe_load(text))


@FEWER
@given(st.lists(mappings, min_size=1, max_size=3))
def test_every_document_of_a_stream_reads_back_with_its_strings(documents: list[dict[str, Any]]) -> None:
    text = kubeyaml.dump_all(documents, sort_keys=False)
    assert_strings_come_back(documents, text, list(yaml.safe_load_all(text)))


@pytest.mark.parametrize("text", MISREAD_AS_OTHER)
def test_a_string_some_reader_would_misread_is_written_quoted_as_key_and_value(text: str) -> None:
    assert non_string(text) is not None or not pyyaml_reads_plain_as_string(text), (
        f"{text!r} written plain is a string to every reader: not a case for this table")
    data = {"metadata": {"name": text, "labels": {text: text}}, "data": [text]}
    written = kubeyaml.dump(data)
    assert_strings_come_back(data, written, yaml.safe_load(written))


def test_numbers_booleans_and_null_stay_what_they_are() -> None:
    data = {"replicas": 2, "ratio": 0.5, "paused": False, "quota": None, "gpus": "2", "name": "trainer"}
    written = kubeyaml.dump(data, sort_keys=False)
    assert written == "replicas: 2\nratio: 0.5\npaused: false\nquota: null\ngpus: '2'\nname: trainer\n"
