"""The serving certificate: a TLS 1.2+ context, reloaded in place when the files change.

A Secret mounted as a volume is updated by kubelet swapping a symlink; cert-manager renews
before expiry. Loading the new pair into the same ``SSLContext`` makes every later handshake
use it, with no restart and no dropped connection. A half-written pair (the key does not match
the certificate yet) is not loaded; the old one stays until the next look succeeds.

With ``client_ca`` (PEM), the server also asks each client for a certificate and verifies one
that is offered against that CA alone (``CERT_OPTIONAL``: a client without one still connects,
and is then judged by what else it sends); a certificate that CA did not sign ends the
handshake. A data listener uses it for the API server's front-proxy CA (``process.callers``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from pathlib import Path

log = logging.getLogger(__name__)

Stamp = tuple[tuple[int, int, int], ...]


def server_context(cert: Path, key: Path, client_ca: str | None = None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cadata=client_ca)
    return context


class ReloadingCertificate:
    """Holds the server's SSLContext and reloads the pair when either file changes."""

    def __init__(self, cert: Path, key: Path, client_ca: str | None = None) -> None:
        self.cert = cert
        self.key = key
        self._stamp = self._look()
        self.context = server_context(cert, key, client_ca)
        self.reloads = 0

    def _look(self) -> Stamp:
        stats = [os.stat(p) for p in (self.cert, self.key)]  # follows the Secret's symlinks
        return tuple((s.st_mtime_ns, s.st_size, s.st_ino) for s in stats)

    def check(self) -> bool:
        """Reload if the files changed since the last load; whether a new pair is in use."""
        try:
            stamp = self._look()
            if stamp == self._stamp:
                return False
            self.context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as e:
            log.warning("keeping the current serving certificate: %s cannot be loaded yet: %s", self.cert, e)
            return False
        self._stamp = stamp
        self.reloads += 1
        log.info("loaded a new serving certificate from %s", self.cert)
        return True

    async def watch(self, every: float) -> None:
        """Look for new files every ``every`` seconds until cancelled."""
        while True:
            await asyncio.sleep(every)
            self.check()
