"""Which pods count, and where (``policy.membership``): the rule the controller, the CLI and the
simulator share."""

from __future__ import annotations

import pytest

from policy.membership import Membership, left_team_message, membership
from tests.builders import MakePod

COUNTS, LEFT, NOTHING = Membership.COUNTS, Membership.LEFT_TEAM, Membership.NOTHING


def vision(gated: bool) -> MakePod:
    made = MakePod("vision-research", "p").queue("train").team("vision").gpus(1).admitted(0)
    return made.gated() if gated else made.running("n1")


@pytest.mark.parametrize(("case", "gated", "namespace_team", "marked", "expected"), [
    ("gated, its namespace still in its team", True, "vision", True, COUNTS),
    ("gated, its namespace lost the team label", True, None, True, LEFT),
    ("gated, its namespace names another team now", True, "nlp", True, LEFT),
    ("released, its namespace lost the team label: counts where admitted", False, None, True, COUNTS),
    ("released, its namespace names another team now", False, "nlp", True, COUNTS),
    ("released, never marked by admission", False, "vision", False, NOTHING),
    ("gated, never marked by admission", True, "vision", False, NOTHING),
    ("gated, never marked, in a namespace not in its team: held and said so", True, None, False, LEFT),
])
def test_where_a_pod_stands(case: str, gated: bool, namespace_team: str | None, marked: bool,
                            expected: Membership) -> None:
    assert membership(vision(gated).model(), namespace_team, marked=marked) is expected, case


def test_the_message_says_which_team_admitted_it_and_how_to_get_it_released() -> None:
    assert left_team_message(vision(True).model()) == (
        "namespace vision-research is no longer opted in to team vision, which admitted this pod to queue "
        "train: it is not released until the namespace's label sluicegate.dev/team says vision again; "
        "delete it and submit it anew to be judged as the namespace is now")
