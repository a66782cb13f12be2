"""Whether a gate controller is at work: read from its leader-election Lease.

The CLI takes the controller's decision again and can say "fits now: the controller releases
it on its next cycle"; that is true only while some replica holds the Lease. A Lease that is
absent, released (no holder) or not renewed within its duration means nothing is being
released, and the commands say so instead.

Pure: the Lease comes in as JSON (or None when it does not exist).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from cli.stories import when
from policy import fields
from policy.fields import InvalidObject

NOBODY: Final = "no gate controller holds the lease"
STALLED: Final = ": nothing is being released"


def stalled(lease: Mapping[str, Any] | None, now: float, *, where: str) -> str:
    """"" while a controller holds ``lease`` (``where`` is its namespace/name); else the one
    line that says since when nothing is released."""
    if lease is None:
        return f"{NOBODY} (there is no Lease {where}){STALLED}"
    spec = fields.obj(lease.get("spec"))
    duration = spec.get("leaseDurationSeconds")
    seconds = float(duration) if isinstance(duration, int | float) else 0.0
    try:
        renewed = fields.timestamp(spec.get("renewTime") or spec.get("acquireTime"), "spec.renewTime")
    except InvalidObject:
        renewed = 0.0
    holder = str(spec.get("holderIdentity") or "")
    if holder and renewed and renewed + seconds >= now:
        return ""
    since = when(renewed + seconds if holder else renewed) if renewed else ""
    return f"{NOBODY} (since {since}){STALLED}" if since else f"{NOBODY}{STALLED}"
