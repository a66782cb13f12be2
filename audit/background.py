"""An asyncio event loop in a thread of its own, for synchronous callers (e2e tests use kubectl).

``with Background() as loop:`` starts it; ``loop.start(coro)`` runs a long-lived task there,
``loop.run(coro)`` runs one to completion and returns its result. Leaving the block cancels
what still runs, stops the loop and joins the thread; a task that failed (rather than being
cancelled) makes the exit raise ``BackgroundError``, so a crashed recorder is never silent.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

T = TypeVar("T")
STOP_SECONDS = 10.0


class BackgroundError(Exception):
    """A task in the background loop failed."""


class Background:
    def __init__(self, name: str = "audit") -> None:
        self.name = name
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._tasks: list[concurrent.futures.Future[Any]] = []

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def start(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` in the loop; cancelled when the block ends."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        self._tasks.append(future)
        return future

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` in the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        for future in self._tasks:
            future.cancel()
        failures = []
        for future in self._tasks:
            with contextlib.suppress(concurrent.futures.CancelledError, concurrent.futures.TimeoutError):
                failure = future.exception(timeout=STOP_SECONDS)
                if failure is not None:
                    failures.append(failure)
        self.loop.call_soon_threadsafe(self._shutdown)
        self._thread.join(STOP_SECONDS)
        if not self._thread.is_alive():
            self.loop.close()
        if failures and kind is None:
            raise BackgroundError(f"{self.name}: a background task failed: {failures[0]!r}") from failures[0]

    def _shutdown(self) -> None:
        for task in asyncio.all_tasks(self.loop):
            task.cancel()
        self.loop.create_task(self._close())

    async def _close(self) -> None:
        await asyncio.sleep(0)  # let cancelled tasks close their connections
        await asyncio.sleep(0.05)
        self.loop.stop()
