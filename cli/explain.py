"""``sluicegate explain POD``: one pod's story, and for a waiting pod what holds it.

    sluicegate explain POD [-n NS] [--kubeconfig F] [--context C] [-o json|yaml]

Who submitted it and with which presets; when it was admitted and gated; why it waits (the
limit with its numbers, its position, what is ahead of it and what runs in its queue); when
the controller released it; where kube-scheduler placed it, or the scheduler's words when it
cannot; how it ran and ended; and its events (``cli.stories``). The three kinds of waiting
read differently: *held by Sluicegate*, *dispatched, waiting for Kubernetes to place it*, and
(not waiting) *running* or *finished*.
"""

from __future__ import annotations

import argparse
import sys

from cli import clusters
from cli.commands import Command
from cli.standings import stand
from cli.stories import render, tell
from policy.fields import InvalidObject, Obj
from policy.marks import counts_for_dispatch
from policy.membership import Membership, membership
from policy.pods import Pod
from policy.quantities import QuantityError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pod", metavar="POD", help="the pod's name")
    clusters.configure(parser, all_namespaces=False)


def run(args: argparse.Namespace) -> int:
    reading = clusters.read_pod(args, args.pod)
    assert reading.pod is not None
    standing = None if reading.forbidden else stand(reading.seen)
    connected = None
    if not reading.forbidden:  # the opted-in namespaces were read: is the pod's one of them?
        namespace = str((reading.pod.get("metadata") or {}).get("namespace") or "")
        connected = any((ns.get("metadata") or {}).get("name") == namespace for ns in reading.seen.namespaces)
        # A pod admission marked keeps the team it was admitted to (policy.membership): its
        # namespace leaving that team holds it, or leaves it counting there; it is not unmanaged.
        connected = connected or _admitted(reading.pod)
    if reading.unserved:
        print(f"Note: {reading.unserved}.", file=sys.stderr)
    name = str((reading.pod.get("metadata") or {}).get("name") or "")
    visible = next((i for i in reading.pending or () if (i.get("metadata") or {}).get("name") == name), None)
    story = tell(reading.pod, reading.events, standing, reading.forbidden, stalled=reading.stalled,
                 connected=connected, visible=visible)
    text = clusters.structured(story.as_json(), args.output)
    sys.stdout.write(text if text is not None else render(story))
    return 0


def _admitted(obj: Obj) -> bool:
    """Whether the controller still holds or counts the pod whatever its namespace says now."""
    try:
        pod = Pod.parse(obj)
    except (InvalidObject, QuantityError):
        return False
    return membership(pod, None, marked=counts_for_dispatch(pod)) is not Membership.NOTHING


COMMAND = Command("explain", "one pod's story: who, which presets, why it waits, where it runs",
                  configure, run, description=__doc__ or "")
