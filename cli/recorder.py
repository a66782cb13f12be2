"""Reaching the recorder from the command line: through the API server, which serves the
records as the aggregated API ``records.sluicegate.dev`` (the recorder behind it), with the
user's own kubeconfig (impersonation included, as for every other command), so the API server
authenticates the user and Kubernetes RBAC (``list records`` in the recorder's namespace)
decides who may read them. No port-forward and no credentials of its own.

    GET /apis/records.sluicegate.dev/v1alpha1/namespaces/<namespace>/records?since=<RFC 3339>
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Final

from cli.commands import CommandError, add_global_flags
from kube.connecting import ApiError, KubeError
from kube.reading import open_as_user
from kube.resources import RECORDS
from records.sources import Recorded, RecordList
from records.trace import format_time

NAMESPACE: Final = "sluicegate-system"
USER_AGENT: Final = "sluicegate-cli"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_argument_group("the recorder (read through the API server: records.sluicegate.dev)")
    add_global_flags(where, namespaced=False)
    where.add_argument("--recorder-namespace", default=NAMESPACE, help="the recorder's namespace")


def path(args: argparse.Namespace) -> str:
    return RECORDS.path(namespace=args.recorder_namespace)


async def _fetch(args: argparse.Namespace, since: float | None) -> RecordList:
    connection = (await open_as_user(args.kubeconfig or "", args.context, user_agent=USER_AGENT)).connection
    try:
        query = {"since": format_time(since)} if since is not None else None
        data = await connection.request("GET", path(args), query=query, timeout=300)
    finally:
        await connection.close()
    return RecordList.from_json(data, source=f"the recorder ({path(args)})")


def fetch(args: argparse.Namespace, since: float | None) -> RecordList:
    """The recorder's records that touch the period from ``since``; ``CommandError`` when it
    cannot be read (not reachable, or RBAC says no)."""
    try:
        return asyncio.run(_fetch(args, since))
    except ApiError as e:
        if e.status == 403:
            raise CommandError(f"you may not read the run records: {e} (they name every team's "
                               f"pods and submitters, so your platform administrators grant them: "
                               f"the Role sluicegate-records-reader in {args.recorder_namespace})") from e
        raise CommandError(f"cannot read the run records from the recorder: {e}") from e
    except KubeError as e:
        raise CommandError(f"cannot read the run records from the recorder: {e}") from e


def source(args: argparse.Namespace) -> Recorded:
    return Recorded(lambda since: fetch(args, since))
