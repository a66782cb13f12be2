"""Filling the ``caBundle`` of webhook configurations and APIServices, so the API server trusts
the webhook and the recorder (both serve with the certificate ``certs.issuing`` makes).

Works on any stream of manifests (a file, ``kubectl kustomize`` output): every webhook of every
Mutating- and ValidatingWebhookConfiguration, and every APIService that names a Service, gets
the CA; everything else passes unchanged.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any, Final

import yaml

from process import kubeyaml

WEBHOOK_CONFIGURATIONS: Final = frozenset({"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"})


def is_webhook_configuration(doc: object) -> bool:
    return isinstance(doc, dict) and doc.get("kind") in WEBHOOK_CONFIGURATIONS


def is_api_service(doc: object) -> bool:
    return isinstance(doc, dict) and doc.get("kind") == "APIService"


def fill(documents: Iterable[Any], ca_pem: bytes) -> list[Any]:
    """The documents, with every webhook configuration's ``clientConfig.caBundle`` and every
    APIService's ``spec.caBundle`` set."""
    bundle = base64.b64encode(ca_pem).decode()
    out = []
    for doc in documents:
        if is_webhook_configuration(doc):
            for hook in doc.get("webhooks") or ():
                hook.setdefault("clientConfig", {})["caBundle"] = bundle
        if is_api_service(doc) and (doc.get("spec") or {}).get("service"):
            doc["spec"]["caBundle"] = bundle
        out.append(doc)
    return out


def fill_text(text: str, ca_pem: bytes) -> str:
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    return kubeyaml.dump_all(fill(docs, ca_pem), sort_keys=False)
