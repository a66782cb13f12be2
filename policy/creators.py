"""Who created a pod, and on whose behalf: nodes and their mirror pods, controllers and stamps.

- A mirror pod is the API's record of a static pod a kubelet already runs. Only a node creates
  one: the request's user is ``system:node:<name>`` in the group ``system:nodes``, and the pod is
  bound to that node. Anyone else's pod carrying the mirror annotation is an ordinary pod.
- A pod created by a controller for an owner whose CREATE admission judged (``reviews.OWNERS``)
  is submitted by whoever created the owner: admission stamped them on the owner's pod template.
  The stamp counts only when the pod's creator is one of the controllers that really create that
  kind's pods and the Policy trusts it (an operator's account: the one the Policy names for the
  kind). The same holds one level up: a Job whose controller owner
  is a CronJob carries the CronJob's stamp when the cronjob controller created it. Otherwise an
  owner object's stamp never counts: it is judged as the account that creates it.
- When the webhook knows who created the owner (it judged that CREATE itself), the stamp must
  name that person.
- A Job made by hand from a stamped CronJob (``kubectl create job --from=cronjob/...``) carries
  the CronJob's stamp and names the CronJob as its owner, but was not created by the cronjob
  controller: it is refused unless the stamp names its creator, and the refusal says whose
  stamp it carries and where from, rather than blaming the user for writing it.
"""

from __future__ import annotations

from collections.abc import Mapping

from policy import fields, keys
from policy.fields import Obj
from policy.model import Policy
from policy.pods import Submitter
from policy.reviews import OWNERS, POD, Deny, Kind, OwnerKind, Request


def node_of(request: Request) -> str | None:
    """The node's name when a node made the request, else None."""
    user = request.user
    if keys.NODES_GROUP in request.groups and user.startswith(keys.NODE_USER_PREFIX):
        return user.removeprefix(keys.NODE_USER_PREFIX) or None
    return None


def is_mirror_pod(request: Request) -> bool:
    """A real mirror pod: created by a node, carrying the mirror annotation, bound to that node."""
    if request.kind != POD:
        return False
    node = node_of(request)
    meta = fields.obj(request.object.get("metadata"))
    notes = fields.string_map(meta.get("annotations"))
    bound = fields.obj(request.object.get("spec")).get("nodeName")
    return node is not None and keys.MIRROR_POD_ANNOTATION in notes and bound == node


def controller_owner(meta: Obj) -> Kind | None:
    """The kind of the object's controller ownerReference, if it has one."""
    ref = _controller_reference(meta)
    return None if ref is None else _kind(ref)


def _kind(ref: Obj) -> Kind:
    group, _, version = str(ref.get("apiVersion") or "").rpartition("/")
    return Kind(group, version, str(ref.get("kind") or ""))


def _controller_reference(meta: Obj) -> Obj | None:
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


_KUBE_SYSTEM = f"{keys.SERVICE_ACCOUNT_PREFIX}kube-system:"


def creates(row: OwnerKind, user: str, policy: Policy) -> bool:
    """``user`` is one of the accounts that really create the objects of ``row``'s kind: one of
    Kubernetes' controllers of the row, or the operator account the Policy names for it."""
    if user in row.controllers:
        return True
    return bool(row.operator) and policy.operator_accounts.get(row.operator) == user


def _trusted(row: OwnerKind, user: str, policy: Policy) -> bool:
    """An operator account the Policy names is trusted by being named; Kubernetes' own
    controllers must also be among the Policy's ``trustedControllers``."""
    return user not in row.controllers or user in policy.trusted_controllers


def honours_stamp(request: Request, meta: Obj, policy: Policy) -> Kind | None:
    """The owner kind whose stamp this object (a pod, or a Job a CronJob owns) may carry, or None
    when any stamp is the creator's own writing: the object must be of the kind the owner's
    controllers create, its creator one of them and trusted by the Policy."""
    owner = controller_owner(meta)
    row = OWNERS.get(owner) if owner is not None else None
    if row is None or row.creates != request.kind or not creates(row, request.user, policy):
        return None
    if not _trusted(row, request.user, policy):
        return None
    return owner


def untrusted_stamp(request: Request, meta: Obj, policy: Policy) -> Deny | None:
    """The refusal for an object that one of its owner's own controllers created from a stamped
    template while the Policy does not trust that controller: the stamp is Sluicegate's, the
    missing trust is the administrator's to fix (not the user's). The same for an object a
    service account created for an operator's kind when the Policy names another account as
    that kind's operator (an operator installed under another name)."""
    owner = controller_owner(meta)
    row = OWNERS.get(owner) if owner is not None else None
    if row is None or owner is None or row.creates != request.kind:
        return None
    if keys.SUBMITTER_ANNOTATION not in fields.string_map(meta.get("annotations")):
        return None
    if row.operator and not creates(row, request.user, policy):
        if not request.user.startswith(keys.SERVICE_ACCOUNT_PREFIX) or request.user.startswith(_KUBE_SYSTEM):
            return None  # a person's (or one of Kubernetes' own controllers') writing: refused as such
        named = policy.operator_accounts.get(row.operator)
        return Deny(
            f"{request.user} created this {request.kind.kind} for a {owner.kind} whose template "
            f"Sluicegate stamped ({keys.SUBMITTER_ANNOTATION}), but the Policy names "
            + (f"{named} as the operator" if named else "no operator")
            + f" of {row.operator}: a platform administrator names the operator's account in the "
            f"Policy's spec.operatorAccounts ({row.operator}: {request.user})"
        )
    if request.user not in row.controllers or request.user in policy.trusted_controllers:
        return None
    return Deny(
        f"{request.user} created this {request.kind.kind} for a {owner.kind} whose template "
        f"Sluicegate stamped ({keys.SUBMITTER_ANNOTATION}), but the Policy does not trust "
        f"{request.user}: a platform administrator adds it to the Policy's "
        "spec.trustedControllers"
    )


def submitter_of(
    request: Request, policy: Policy, owner_creator: Submitter | None = None
) -> Submitter | Deny:
    """Who a pod CREATE is submitted by (see the module's rules).

    ``owner_creator`` is who created the pod's owner when the webhook knows it. A pod whose
    stamp is not honoured is submitted by its creator; a stamp it carries is then refused as
    written by hand, unless it names the creator.
    """
    meta = fields.obj(request.object.get("metadata"))
    owner = honours_stamp(request, meta, policy)
    if owner is None:
        return untrusted_stamp(request, meta, policy) or request.creator
    raw = fields.string_map(meta.get("annotations")).get(keys.SUBMITTER_ANNOTATION)
    stamped = Submitter.from_annotation(raw) if raw else None
    if owner_creator is None:
        return stamped or request.creator
    if raw is not None and stamped != owner_creator:
        named = f"user {stamped.user}" if stamped is not None else f'"{raw}"'
        creator = f"user {owner_creator.user}"
        if stamped is not None and stamped.user == owner_creator.user:  # the groups differ
            named += f" in groups {_groups(stamped)}"
            creator += f" in groups {_groups(owner_creator)}"
        return Deny(
            f"annotation {keys.SUBMITTER_ANNOTATION} names {named}, but the {owner.kind} that "
            f"owns this pod was created by {creator}"
        )
    return owner_creator


def _groups(submitter: Submitter) -> str:
    return ", ".join(sorted(submitter.groups)) or "(none)"


def stamp_of_owner(request: Request, meta: Obj, stamped: Submitter) -> Deny | None:
    """The refusal for an object made by hand from its owner's stamped template, such as a Job
    that ``kubectl create job --from=cronjob/<name>`` makes from someone else's CronJob: it
    names the CronJob as its controller owner and its template carries the CronJob's stamp.

    What admission knows at that CREATE is only what the object says (its ownerReference and the
    stamp on its template) and who creates it, so that is what the refusal names. None when the
    object names no owner whose controllers create objects of its kind."""
    ref = _controller_reference(meta)
    owner = None if ref is None else _kind(ref)
    row = None if owner is None else OWNERS.get(owner)
    if ref is None or owner is None or row is None or row.creates != request.kind:
        return None
    kind, name = request.kind.kind, str(ref.get("name") or "")
    who = stamped.user
    if stamped.user == request.user:  # the same person, with other groups than the stamp's
        who += f" in groups {_groups(stamped)}"
        you = f" (you are {request.user} in groups {_groups(request.creator)})"
    else:
        you = ""
    return Deny(
        f"this {kind}'s pod template carries the submitter stamp of user {who} "
        f"(annotation {keys.SUBMITTER_ANNOTATION}), and the {kind} names {owner.kind} {name} as "
        f"its owner, as kubectl create {kind.lower()} --from={owner.kind.lower()}/{name} makes it: "
        f"its pods would be judged and counted as {stamped.user}'s, so only {who} or the "
        f"{owner.kind} controller may create {kind}s from that {owner.kind}{you}; create a {kind} "
        "of your own instead"
    )
