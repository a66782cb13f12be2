"""The webhook's serving certificate: a CA and a certificate for the Service's DNS names.

The recorder serves with the same certificate (it mounts the same Secret), so it also names the
recorder's Service: the API server's aggregation layer checks that name when it proxies the
records API (``records.sluicegate.dev``) to the recorder.

``issue`` writes ``ca.crt``/``ca.key`` (reused when present, so a renewed serving certificate
keeps the caBundle the API server trusts), ``tls.crt``/``tls.key``, and ``secret.yaml``: the
``kubernetes.io/tls`` Secret the Deployment mounts. Locally, where the webhook runs as a process
on this machine, the certificate also names 127.0.0.1.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from certs.authority import Authority, KeyPair
from process import kubeyaml

NAMESPACE: Final = "sluicegate-system"
SERVICE: Final = "sluicegate-webhook"
RECORDER: Final = "sluicegate-recorder"
VISIBILITY: Final = "sluicegate-visibility"
"""The controller's visibility API Service: the controller serves it with the webhook's
certificate too, so that one names it (the aggregation layer checks the name)."""
SECRET: Final = "sluicegate-webhook-tls"
CA_NAME: Final = "sluicegate-webhook-ca"


def service_hosts(service: str, namespace: str) -> tuple[str, ...]:
    """Every name a client in the cluster may use for the Service."""
    return (service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local")


@dataclass(frozen=True, slots=True)
class WebhookFiles:
    """Where ``issue`` writes, in one directory."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def cert(self) -> Path:
        return self.directory / "tls.crt"

    @property
    def key(self) -> Path:
        return self.directory / "tls.key"

    @property
    def secret(self) -> Path:
        return self.directory / "secret.yaml"


def secret_manifest(name: str, namespace: str, pair: KeyPair, ca_pem: bytes) -> dict[str, Any]:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {
            "name": name, "namespace": namespace, "labels": {"app.kubernetes.io/name": "sluicegate"}
        },
        "data": {"tls.crt": b64(pair.cert_pem), "tls.key": b64(pair.key_pem), "ca.crt": b64(ca_pem)},
    }


def issue(
    directory: Path,
    *,
    service: str = SERVICE,
    namespace: str = NAMESPACE,
    hosts: Sequence[str] = (),
    secret: str = SECRET,
    new_ca: bool = False,
    also: Sequence[str] = (RECORDER, VISIBILITY),
) -> WebhookFiles:
    """Create (or reuse) the CA and issue the serving certificate for the Service's names, the
    names of the Services in ``also`` (in the same namespace) and ``hosts`` (more DNS names or
    IP addresses, such as 127.0.0.1)."""
    files = WebhookFiles(directory)
    if not new_ca and files.ca_cert.exists() and files.ca_key.exists():
        authority = Authority.load(files.ca_cert, files.ca_key)
    else:
        authority = Authority.create(CA_NAME)
        authority.key_pair.write(directory, "ca")
    others = [name for other in also for name in service_hosts(other, namespace)]
    names = tuple(dict.fromkeys((*service_hosts(service, namespace), *others, *hosts)))
    pair = authority.issue_serving(f"{service}.{namespace}.svc", names)
    # Write to new names, then rename: a webhook watching the files never sees half a pair.
    pair.write(directory, "tls.new")
    (directory / "tls.new.key").replace(files.key)
    (directory / "tls.new.crt").replace(files.cert)
    manifest = secret_manifest(secret, namespace, pair, authority.cert_pem)
    files.secret.write_text(kubeyaml.dump(manifest, sort_keys=False))
    files.secret.chmod(0o600)
    return files
