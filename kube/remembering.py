"""Answers the API server gave, remembered briefly: the one cache of TokenReviews and
SubjectAccessReviews.

Each answer is kept for ``seconds`` (10 s by default, as Kubernetes' own delegated
authentication and authorization cache theirs), so a burst of requests from one caller asks
once, and a revoked token or permission stops working within that time. The cache holds at
most ``most`` answers (the oldest go first), so a flood of distinct callers cannot grow it
without bound. Questions in flight are shared: a hundred requests that arrive together with
the same new token make one review, not a hundred; and at most ``at_once`` different questions
are put to the API server at the same time, the others wait their turn. A question that fails
(the API server could not be asked) is not remembered: the next request asks again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Final, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

SECONDS: Final = 10.0
MOST: Final = 4096
AT_ONCE: Final = 8


class Remembered(Generic[K, V]):
    def __init__(
        self,
        *,
        seconds: float = SECONDS,
        most: int = MOST,
        at_once: int = AT_ONCE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seconds = seconds
        self.most = most
        self.clock = clock
        self._answers: dict[K, tuple[float, V]] = {}
        self._asking: dict[K, asyncio.Future[V]] = {}
        self._turns = asyncio.Semaphore(at_once)

    def __len__(self) -> int:
        return len(self._answers)

    async def get(self, key: K, ask: Callable[[], Awaitable[V]]) -> V:
        """The remembered answer to ``key``, else ``ask()``'s (shared with every caller that
        wants it meanwhile). ``ask``'s exceptions reach every one of them."""
        now = self.clock()
        cached = self._answers.get(key)
        if cached is not None and now - cached[0] < self.seconds:
            return cached[1]
        pending = self._asking.get(key)
        if pending is not None:
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                if pending.cancelled():  # the caller who asked went away: ask again
                    return await self.get(key, ask)
                raise
        pending = asyncio.get_running_loop().create_future()
        self._asking[key] = pending
        try:
            async with self._turns:
                answer = await ask()
        except asyncio.CancelledError:
            pending.cancel()
            raise
        except Exception as e:
            pending.set_exception(e)
            pending.exception()  # marked as seen: the waiters, if any, raise it themselves
            raise
        finally:
            del self._asking[key]
        self._keep(key, answer)
        pending.set_result(answer)
        return answer

    def _keep(self, key: K, answer: V) -> None:
        self._answers.pop(key, None)
        self._answers[key] = (self.clock(), answer)
        if len(self._answers) > self.most:
            now = self.clock()
            self._answers = {k: v for k, v in self._answers.items() if now - v[0] < self.seconds}
            while len(self._answers) > self.most:
                del self._answers[next(iter(self._answers))]
