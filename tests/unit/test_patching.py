"""JSON patches: the smallest patch between two pods, and applying patches faithfully."""

from __future__ import annotations

from typing import Any

import pytest

from policy.patching import PatchError, PatchOp, apply, diff, escape, pointer, unescape


@pytest.mark.parametrize(
    ("key", "token"),
    [
        pytest.param("sluicegate.dev/queue", "sluicegate.dev~1queue", id="a slash in a label key"),
        pytest.param("a~b", "a~0b", id="a tilde"),
        pytest.param("~/", "~0~1", id="a tilde before a slash is not read back as a slash"),
        pytest.param("plain", "plain", id="a plain key is left alone"),
    ],
)
def test_pointer_tokens_escape_tilde_and_slash(key: str, token: str) -> None:
    assert escape(key) == token
    assert unescape(token) == key


def test_a_pointer_joins_escaped_tokens() -> None:
    assert pointer("metadata", "labels", "sluicegate.dev/team") == "/metadata/labels/sluicegate.dev~1team"
    assert pointer("spec", "containers", 0) == "/spec/containers/0"


@pytest.mark.parametrize(
    ("before", "after", "patch"),
    [
        pytest.param({"a": 1}, {"a": 1}, [], id="nothing changed: an empty patch"),
        pytest.param(
            {"metadata": {}},
            {"metadata": {"labels": {"x/y": "1"}}},
            [{"op": "add", "path": "/metadata/labels", "value": {"x/y": "1"}}],
            id="a missing map is added whole",
        ),
        pytest.param(
            {"metadata": {"labels": {"app": "a"}}},
            {"metadata": {"labels": {"app": "a", "x/y": "1"}}},
            [{"op": "add", "path": "/metadata/labels/x~1y", "value": "1"}],
            id="an existing map gains only its new key",
        ),
        pytest.param(
            {"a": "old", "b": 1},
            {"a": "new"},
            [{"op": "remove", "path": "/b"}, {"op": "replace", "path": "/a", "value": "new"}],
            id="a changed value is replaced and a dropped one removed",
        ),
        pytest.param(
            {"gates": [{"name": "other"}]},
            {"gates": [{"name": "other"}, {"name": "mine"}]},
            [{"op": "add", "path": "/gates/-", "value": {"name": "mine"}}],
            id="an item appended to a list is added at the end",
        ),
        pytest.param(
            {"c": [{"name": "main"}, {"name": "side"}]},
            {"c": [{"name": "main", "env": []}, {"name": "side"}]},
            [{"op": "add", "path": "/c/0/env", "value": []}],
            id="a changed list item is patched in place",
        ),
        pytest.param(
            {"c": [1, 2, 3]},
            {"c": [1, 3]},
            [{"op": "replace", "path": "/c", "value": [1, 3]}],
            id="a list that shrank is replaced whole",
        ),
        pytest.param(
            {"labels": None},
            {"labels": {"a": "b"}},
            [{"op": "replace", "path": "/labels", "value": {"a": "b"}}],
            id="a null map is replaced",
        ),
        pytest.param(
            {"n": 1},
            {"n": True},
            [{"op": "replace", "path": "/n", "value": True}],
            id="true is not 1 in JSON",
        ),
    ],
)
def test_diff_touches_only_what_differs(before: Any, after: Any, patch: list[PatchOp]) -> None:
    assert list(diff(before, after)) == patch
    assert apply(before, diff(before, after)) == after


def test_applying_a_patch_leaves_the_input_alone() -> None:
    doc = {"metadata": {"labels": {"a": "1"}}}
    out = apply(doc, [{"op": "add", "path": "/metadata/labels/b", "value": "2"}])
    assert doc == {"metadata": {"labels": {"a": "1"}}}
    assert out == {"metadata": {"labels": {"a": "1", "b": "2"}}}


@pytest.mark.parametrize(
    ("patch", "result"),
    [
        pytest.param([{"op": "add", "path": "/l/1", "value": "x"}], {"m": {"k/1": 1}, "l": ["a", "x", "b"]},
                     id="add inserts into a list"),
        pytest.param([{"op": "remove", "path": "/m/k~11"}], {"m": {}, "l": ["a", "b"]},
                     id="remove takes out an escaped key"),
        pytest.param([{"op": "replace", "path": "/l/0", "value": "z"}], {"m": {"k/1": 1}, "l": ["z", "b"]},
                     id="replace swaps a list item"),
        pytest.param([{"op": "test", "path": "/l/1", "value": "b"}], {"m": {"k/1": 1}, "l": ["a", "b"]},
                     id="a passing test changes nothing"),
        pytest.param([{"op": "move", "from": "/l/0", "path": "/m/first"}],
                     {"m": {"k/1": 1, "first": "a"}, "l": ["b"]}, id="move"),
        pytest.param([{"op": "copy", "from": "/m", "path": "/n"}],
                     {"m": {"k/1": 1}, "n": {"k/1": 1}, "l": ["a", "b"]}, id="copy"),
        pytest.param([{"op": "replace", "path": "", "value": {}}], {}, id="replace the whole document"),
    ],
)
def test_every_operation_applies(patch: list[PatchOp], result: Any) -> None:
    assert apply({"m": {"k/1": 1}, "l": ["a", "b"]}, patch) == result


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        pytest.param([{"op": "replace", "path": "/missing", "value": 1}], "path /missing does not exist",
                     id="replace needs the path to exist"),
        pytest.param([{"op": "remove", "path": "/l/5"}], "path /l/5 does not exist",
                     id="remove out of range"),
        pytest.param([{"op": "add", "path": "/l/9", "value": 1}], "path /l/9: index out of range",
                     id="add past the end of a list"),
        pytest.param([{"op": "test", "path": "/l/0", "value": "z"}], "test failed at /l/0",
                     id="a failing test"),
        pytest.param([{"op": "add", "path": "l", "value": 1}], "'l' is not a JSON pointer",
                     id="a bad pointer"),
        pytest.param([{"op": "add", "path": "/x/y", "value": 1}], "path /x/y does not exist",
                     id="add needs the parent to exist"),
    ],
)
def test_a_patch_that_cannot_apply_is_an_error(patch: list[PatchOp], message: str) -> None:
    with pytest.raises(PatchError) as caught:
        apply({"l": ["a"]}, patch)
    assert str(caught.value) == message
