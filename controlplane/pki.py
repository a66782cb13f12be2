"""The local control plane's certificates, keys and kubeconfig files."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from certs.authority import Authority, KeyPair, signing_key_pair
from process import kubeyaml

ADMIN_USER = "kubernetes-admin"
ADMIN_GROUP = "system:masters"
# The API server's front proxy (the aggregation layer): the client certificate it proxies with,
# from a CA of its own, as kubeadm names them. Aggregated API servers trust only this name.
FRONT_PROXY_CLIENT = "front-proxy-client"
# The names under which the apiserver is reached from inside and outside the cluster.
APISERVER_HOSTS = (
    "127.0.0.1", "localhost", "10.96.0.1",
    "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True, slots=True)
class Pki:
    """Paths of every file the components read."""

    root: Path

    @property
    def ca_cert(self) -> Path:
        return self.root / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.root / "ca.key"

    @property
    def apiserver_cert(self) -> Path:
        return self.root / "apiserver.crt"

    @property
    def apiserver_key(self) -> Path:
        return self.root / "apiserver.key"

    @property
    def admin_cert(self) -> Path:
        return self.root / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.root / "admin.key"

    @property
    def front_proxy_ca_cert(self) -> Path:
        return self.root / "front-proxy-ca.crt"

    @property
    def front_proxy_client_cert(self) -> Path:
        return self.root / "front-proxy-client.crt"

    @property
    def front_proxy_client_key(self) -> Path:
        return self.root / "front-proxy-client.key"

    @property
    def sa_public(self) -> Path:
        return self.root / "sa.pub"

    @property
    def sa_private(self) -> Path:
        return self.root / "sa.key"

    def generate(self) -> None:
        """Create the CA, the apiserver's serving cert, the admin client cert, the SA key and
        the front proxy's CA and client certificate."""
        ca = Authority.create("sluicegate-local-ca")
        ca.key_pair.write(self.root, "ca")
        ca.issue_serving("kube-apiserver", APISERVER_HOSTS).write(self.root, "apiserver")
        ca.issue_client(ADMIN_USER, (ADMIN_GROUP,)).write(self.root, "admin")
        sa = signing_key_pair()
        self.sa_public.write_bytes(sa.cert_pem)
        self.sa_private.write_bytes(sa.key_pem)
        self.sa_private.chmod(0o600)
        self.generate_front_proxy()

    def generate_front_proxy(self) -> None:
        """The front proxy's own CA (never the cluster's: a user's client certificate must not
        pass for the proxy) and its client certificate."""
        ca = Authority.create("front-proxy-ca")
        self.front_proxy_ca_cert.write_bytes(ca.cert_pem)
        ca.issue_client(FRONT_PROXY_CLIENT).write(self.root, "front-proxy-client")

    def authority(self) -> Authority:
        return Authority.load(self.ca_cert, self.ca_key)

    def write_kubeconfig(self, path: Path, server: str, name: str = "sluicegate-local") -> None:
        """A self-contained admin kubeconfig (certificates embedded) for kubectl and clients."""
        admin = KeyPair(self.admin_cert.read_bytes(), self.admin_key.read_bytes())
        self.write_client_kubeconfig(path, server, ADMIN_USER, admin, name)

    def write_client_kubeconfig(
        self, path: Path, server: str, user: str, client: KeyPair, name: str = "sluicegate-local"
    ) -> None:
        """A self-contained kubeconfig in which ``user`` authenticates with ``client``."""

        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": {
                "server": server,
                "certificate-authority-data": b64(self.ca_cert.read_bytes()),
            }}],
            "users": [{"name": user, "user": {
                "client-certificate-data": b64(client.cert_pem),
                "client-key-data": b64(client.key_pem),
            }}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
            "current-context": name,
        }
        path.write_text(kubeyaml.dump(config, sort_keys=False))
        path.chmod(0o600)
