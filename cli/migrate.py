"""``sluicegate migrate-storage``: every Queue, Team, Preset and Policy stored again in the
version the CRDs now store, and the CRDs told that no other version is stored.

    sluicegate migrate-storage [--kubeconfig F] [--context C]

Once the CRDs of a release that stores a new version are applied, the objects written before
stay in etcd as they were written, and each CRD's ``status.storedVersions`` keeps the old
version listed. This command reads every object of the four kinds and writes it back unchanged
(the API server stores it in the CRD's storage version), then sets ``storedVersions`` to that
version alone, so that a later release may stop serving the old one. Run it after the upgrade,
while Sluicegate runs; running it again does nothing. A write that meets a newer one (409)
reads the object again; an object deleted meanwhile is skipped; a kind whose CRD does not
exist is named in one line and the others are migrated. It needs to update the four
kinds and the CRDs' status: a cluster administrator's rights.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, Final

from cli.clusters import run_as_user
from cli.commands import Command, CommandError, add_global_flags
from kube.connecting import JSON, MERGE_PATCH, ApiError, Connection
from kube.reading import list_all
from kube.resources import CATALOG, CRDS, Resource

# A write that meets a newer one reads the object again; the controller writes a Queue's
# status a few times a minute at most, so a handful of tries always suffices.
TRIES: Final = 5


def configure(parser: argparse.ArgumentParser) -> None:
    add_global_flags(parser, namespaced=False)


def storage_version(crd: JSON) -> str:
    """The one version a CRD stores new writes in."""
    versions: list[dict[str, Any]] = crd.get("spec", {}).get("versions", [])
    stored = [str(v.get("name")) for v in versions if v.get("storage")]
    return stored[0] if len(stored) == 1 else ""


async def _rewrite(connection: Connection, resource: Resource, item: JSON) -> bool:
    """Write ``item`` back unchanged; False when it was deleted meanwhile."""
    path = resource.path(item["metadata"]["name"])
    for _ in range(TRIES):
        try:
            await connection.request("PUT", path, body=item)
            return True
        except ApiError as e:
            if e.not_found:
                return False
            if not e.conflict:
                raise
        try:
            item = await connection.get(path)
        except ApiError as e:
            if e.not_found:
                return False
            raise
    raise CommandError(f"{resource} {item['metadata']['name']}: changed on every one of {TRIES} tries; "
                       "run the command again")


async def migrate(connection: Connection, resource: Resource, say: Callable[[str], None]) -> int:
    """Store every object of ``resource`` in its CRD's storage version, then make that the only
    stored version; the number of objects written back. A CRD that does not exist is said in one
    line and leaves its kind alone; the caller goes on with the others."""
    try:
        crd = await connection.get(CRDS.path(str(resource)))
    except ApiError as e:
        if not e.not_found:
            raise
        say(f"{resource}: the CRD does not exist; no {resource.kind} was migrated "
            "(apply this release's CRDs: kubectl apply -k manifests/crds)")
        return 0
    storage = storage_version(crd)
    if storage != resource.version:
        raise CommandError(f"{resource} stores {storage or 'no single version'}, not {resource.version}: "
                           "apply this release's CRDs first (kubectl apply -k manifests/crds)")
    before = [str(v) for v in crd.get("status", {}).get("storedVersions", [])]
    if before == [storage]:
        say(f"{resource}: stored as {storage} only; nothing to do")
        return 0
    written = 0
    for item in await list_all(connection, resource):
        written += await _rewrite(connection, resource, item)
    await connection.request("PATCH", CRDS.path(str(resource), subresource="status"),
                             body={"status": {"storedVersions": [storage]}}, content_type=MERGE_PATCH)
    say(f"{resource}: {written} objects written back as {storage}; "
        f"storedVersions [{', '.join(before)}] -> [{storage}]")
    return written


def run(args: argparse.Namespace) -> int:
    async def work(connection: Connection, namespace: str) -> None:
        del namespace  # the four kinds are cluster-scoped
        for resource in CATALOG:
            await migrate(connection, resource, lambda line: print(line, flush=True))

    run_as_user(args, work)
    return 0


COMMAND = Command("migrate-storage", "store every Queue, Team, Preset and Policy in the CRDs' storage "
                  "version (after an upgrade)", configure, run, description=__doc__ or "")
