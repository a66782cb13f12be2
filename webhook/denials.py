"""Why admission refused something, as a short reason for metrics and logs.

Policy's refusals are messages written for people. The reason label of
``sluicegate_admission_denials_total`` needs a small fixed set instead, so each message is
classified by the phrase that policy (or the final check here) always uses for it. The table is
tested against real policy decisions, so a reworded message shows up as a failing test, not as
"Other" on a dashboard.
"""

from __future__ import annotations

import re
from typing import Final

from policy import keys

CHANGED_AFTER_ADMISSION: Final = "ChangedAfterAdmission"
STARTING: Final = ("Sluicegate's admission is starting: it has not listed the cluster's Queues, Teams, "
                   "Presets and Namespaces yet; submit again in a few seconds")

REASONS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = tuple(
    (reason, re.compile(pattern))
    for reason, pattern in (
        ("NodeName", r"spec\.nodeName is set"),
        ("SystemKey", r"is written by Sluicegate and cannot be set by users"),
        ("StampOfOwner", r"pod template carries the submitter stamp of user .*, and the \S+ names "),
        ("SubmittedByOther", r"was submitted by .* and only they may change what it runs"),
        ("PriorityClass", r'^PriorityClass "[^"]*"'),
        ("GateRemoved", r"may remove the scheduling gate " + re.escape(keys.GATE)),
        ("KeyChanged", r"cannot be (added to|removed from|changed on) "),
        ("PresetNotAllowed", r'^preset "[^"]*".* is not allowed in namespace '),
        ("PresetInvalid", r'^preset "[^"]*".* is invalid \('),
        ("PresetUnknown", r'^preset "[^"]*".* does not exist;'),
        ("QueueNotAllowed", r'^queue "[^"]*".* is not allowed in namespace '),
        ("QueueNotOpen", r'^queue "[^"]*".* is not open to '),
        ("QueueInvalid", r'^queue "[^"]*".* is invalid \('),
        ("QueueUnknown", r'^queue "[^"]*".* does not exist;'),
        ("NoQueue", r"^no queue for this pod"),
        ("Starting", r"^Sluicegate's admission is starting"),
        ("BadAnnotation", r"must be a positive integer|needs annotation "),
        (CHANGED_AFTER_ADMISSION, r"changed after Sluicegate admitted it"),
        ("InvalidSpec", r"^(\S+\.)?spec\."),
        ("AnnotationsTooLarge", r"^metadata\.annotations: \d+ bytes with Sluicegate's stamps"),
    )
)
OTHER: Final = "Other"


def reason(message: str) -> str:
    """The short reason of a refusal message; ``Other`` when no phrase matches."""
    for name, pattern in REASONS:
        if pattern.search(message):
            return name
    return OTHER
