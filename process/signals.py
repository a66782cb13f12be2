"""Waiting for the signal that stops a process (SIGTERM from kubelet, SIGINT from a terminal)."""

from __future__ import annotations

import asyncio
import signal


async def stopped() -> str:
    """Return the name of the first SIGTERM or SIGINT received."""
    loop = asyncio.get_running_loop()
    received: asyncio.Future[str] = loop.create_future()

    def on(sig: signal.Signals) -> None:
        if not received.done():
            received.set_result(sig.name)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on, sig)
    try:
        return await received
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
