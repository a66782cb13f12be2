"""A network namespace of each local cluster's own, for the processes the API server reaches
through a Service (the recorder, the controller's visibility API).

The API server proxies to a Service only through an endpoint that is not loopback
(controlplane/endpoints.py). Such an address is made here, and only here: ``create`` adds a
network namespace and a veth pair, the inner end (in the namespace) and the host end (in this
host's namespace, where the API server runs) each with an address of a /30 of ``SUBNET``, so
the API server routes to the inner address over the pair. Nothing listens on, or connects to,
this host's own network address.

Each cluster directory gets its own names (from a hash of its path) and its own /30 (the first
one free, starting from that hash, chosen under a lock), so several clusters run at once on one
machine. What was made is recorded in ``network.json`` in the cluster's directory; ``remove``
deletes it (``make down``, a cluster's stop) and ``create`` first removes what a killed run of
the same directory left behind.

A process that serves inside the namespace still reaches the API server and answers its probes
on this host's loopback: its served port is a socket that ``listen`` binds inside the namespace
and the process inherits (``--listen-fd``), so only that one port lives there.

Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2's ``ip``.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import ipaddress
import json
import os
import socket
import subprocess
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

SUBNET: Final = ipaddress.IPv4Network("10.250.0.0/16")
"""Private addresses (RFC 1918) that neither this host's networks, the Service range
(10.96.0.0/16) nor kwok's pod addresses (10.0.0.0/16) use."""
PREFIX: Final = 30  # two usable addresses: the host end and the inner end
LOCK: Final = Path("/run/lock/sluicegate-networks.lock")
NETNS_DIR: Final = Path("/run/netns")
CLONE_NEWNET: Final = 0x40000000
STATE: Final = "network.json"


class NetworkError(RuntimeError):
    """The namespace or its veth pair could not be made; the message says what ``ip`` said."""


@dataclass(frozen=True, slots=True)
class Network:
    namespace: str  # the network namespace's name (``ip netns``)
    host_link: str  # the veth's end in this host's namespace
    inner_link: str  # its end inside the namespace
    host_address: str
    inner_address: str  # where the served processes listen, and what the Endpoints name


def names(root: Path) -> tuple[str, str, str]:
    """The namespace's and both links' names for a cluster directory (a link's name has at most
    15 characters)."""
    digest = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:10]
    return f"sluicegate-{digest}", f"sgh-{digest}", f"sgn-{digest}"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    except FileNotFoundError as e:
        raise NetworkError("iproute2's `ip` is not installed: the local cluster needs it for the network "
                           "namespace its served processes run in") from e
    if check and done.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)} failed: {done.stderr.strip()} (the local cluster makes a "
                           "network namespace and a veth pair: it needs root, CAP_NET_ADMIN)")
    return done


def _taken() -> set[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """The /30s of ``SUBNET`` that an address of this host's namespace is in."""
    out = _ip("-o", "-4", "addr", "show").stdout
    taken = set()
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            interface = ipaddress.ip_interface(parts[parts.index("inet") + 1])
            if interface.ip in SUBNET:
                taken.add(ipaddress.ip_network(f"{interface.ip}/{PREFIX}", strict=False))
    return taken


def _slots() -> list[ipaddress.IPv4Network]:
    return list(SUBNET.subnets(new_prefix=PREFIX))


def create(root: Path) -> Network:
    """The cluster's namespace and veth pair, made anew (what a killed run left is removed
    first), recorded in ``root/network.json``."""
    remove(root)
    namespace, host_link, inner_link = names(root)
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two clusters starting at once never take one /30
        slots = _slots()
        start = int(hashlib.sha256(namespace.encode()).hexdigest(), 16) % len(slots)
        taken = _taken()
        slot = next((slots[(start + i) % len(slots)] for i in range(len(slots))
                     if slots[(start + i) % len(slots)] not in taken), None)
        if slot is None:
            raise NetworkError(f"every /{PREFIX} of {SUBNET} is taken on this host")
        host, inner = (str(a) for a in slot.hosts())
        network = Network(namespace, host_link, inner_link, host, inner)
        try:
            _ip("netns", "add", namespace)
            _ip("link", "add", host_link, "type", "veth", "peer", "name", inner_link, "netns", namespace)
            _ip("addr", "add", f"{host}/{PREFIX}", "dev", host_link)
            _ip("link", "set", host_link, "up")
            _ip("-n", namespace, "addr", "add", f"{inner}/{PREFIX}", "dev", inner_link)
            _ip("-n", namespace, "link", "set", inner_link, "up")
            _ip("-n", namespace, "link", "set", "lo", "up")
        except NetworkError:
            _delete(namespace, host_link)
            raise
        root.mkdir(parents=True, exist_ok=True)
        (root / STATE).write_text(json.dumps(asdict(network), indent=2))
    return network


def load(root: Path) -> Network | None:
    """The network recorded for the cluster in ``root``; None when it has none."""
    try:
        return Network(**json.loads((root / STATE).read_text()))
    except (FileNotFoundError, ValueError, TypeError):
        return None


def _delete(namespace: str, host_link: str) -> None:
    # Deleting the host end deletes its peer; the namespace goes once nothing holds it (a socket
    # a process still has open keeps it until the process ends).
    _ip("link", "del", host_link, check=False)
    _ip("netns", "del", namespace, check=False)


def remove(root: Path) -> bool:
    """Delete the cluster's namespace and veth pair, recorded or left by a killed run; whether
    there was one."""
    namespace, host_link, _ = names(root)
    recorded = load(root)
    if recorded is not None:
        namespace, host_link = recorded.namespace, recorded.host_link
    existed = (NETNS_DIR / namespace).exists() or recorded is not None
    if existed:
        _delete(namespace, host_link)
    (root / STATE).unlink(missing_ok=True)
    return existed


def listen(network: Network, port: int) -> socket.socket:
    """A TCP socket listening on ``inner_address:port`` inside the namespace, for a process to
    inherit: a thread of its own enters the namespace (``setns`` changes only the calling
    thread), makes the socket there and ends; the socket stays in the namespace it was made in."""
    made: list[socket.socket] = []
    failed: list[BaseException] = []

    def inside() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(NETNS_DIR / network.namespace, os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    error = ctypes.get_errno()
                    raise NetworkError(f"cannot enter network namespace {network.namespace}: "
                                       f"{os.strerror(error)}")
            finally:
                os.close(fd)
            server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # replicas share it
            server.bind((network.inner_address, port))
            server.listen(socket.SOMAXCONN)
            made.append(server)
        except BaseException as e:  # handed to the caller's thread
            failed.append(e)

    thread = threading.Thread(target=inside, name=f"netns {network.namespace}")
    thread.start()
    thread.join()
    if failed:
        with contextlib.suppress(IndexError):
            made[0].close()
        raise failed[0]
    return made[0]
