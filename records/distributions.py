"""Random distributions written as short strings, for synthetic traces.

Durations (lengths of time as in ``records.periods``: ``45s``, ``30m``, ``2h``)::

    fixed(30m)              always 30 minutes
    exp(30m)                exponential with a mean of 30 minutes
    lognormal(20m, 1.0)     log-normal with a median of 20 minutes and sigma 1.0
    uniform(5m, 2h)         uniform between 5 minutes and 2 hours

Counts (GPUs per workload, trials per sweep)::

    4                       always 4
    1,1,2,4,8               one of the values, each listed value equally likely
    1:6,2:3,8:1             value:weight pairs
    uniform(10, 50)         a whole number from 10 to 50, inclusive
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from itertools import accumulate
from typing import Protocol

from records.periods import format_duration, parse_duration

_CALL = re.compile(r"\s*([a-z]+)\s*\((.*)\)\s*", re.ASCII)


class Distribution(Protocol):
    def sample(self, rnd: random.Random) -> float: ...

    @property
    def mean(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Fixed:
    value: float

    @property
    def mean(self) -> float:
        return self.value

    def sample(self, rnd: random.Random) -> float:
        return self.value


@dataclass(frozen=True, slots=True)
class Exponential:
    mean: float

    def sample(self, rnd: random.Random) -> float:
        return rnd.expovariate(1 / self.mean) if self.mean > 0 else 0.0


@dataclass(frozen=True, slots=True)
class LogNormal:
    median: float
    sigma: float

    @property
    def mean(self) -> float:
        return self.median * math.exp(self.sigma**2 / 2)

    def sample(self, rnd: random.Random) -> float:
        return rnd.lognormvariate(math.log(self.median), self.sigma)


@dataclass(frozen=True, slots=True)
class Uniform:
    low: float
    high: float

    @property
    def mean(self) -> float:
        return (self.low + self.high) / 2

    def sample(self, rnd: random.Random) -> float:
        return rnd.uniform(self.low, self.high)


@dataclass(frozen=True, slots=True)
class Choice:
    """Whole numbers with weights."""

    values: tuple[int, ...]
    cumulative: tuple[float, ...]

    @property
    def mean(self) -> float:
        weights = [b - a for a, b in zip((0.0, *self.cumulative), self.cumulative, strict=False)]
        return sum(v * w for v, w in zip(self.values, weights, strict=True)) / self.cumulative[-1]

    def sample(self, rnd: random.Random) -> float:
        return rnd.choices(self.values, cum_weights=self.cumulative)[0]


@dataclass(frozen=True, slots=True)
class WholeUniform:
    low: int
    high: int

    @property
    def mean(self) -> float:
        return (self.low + self.high) / 2

    def sample(self, rnd: random.Random) -> float:
        return rnd.randint(self.low, self.high)


def _args(text: str, count: int, name: str) -> list[str]:
    args = [a.strip() for a in text.split(",")]
    if len(args) != count or not all(args):
        raise ValueError(f"{name}(...) takes {count} argument{'s' if count > 1 else ''}")
    return args


def parse_durations(text: str) -> Distribution:
    """A distribution of lengths of time, in seconds; ValueError naming the problem."""
    call = _CALL.fullmatch(text)
    if call is None:
        raise ValueError(
            f"{text!r}: expected fixed(D), exp(MEAN), lognormal(MEDIAN, SIGMA) or uniform(LOW, HIGH)"
        )
    name, body = call.groups()
    try:
        if name == "fixed":
            return Fixed(parse_duration(_args(body, 1, name)[0]))
        if name == "exp":
            return Exponential(parse_duration(_args(body, 1, name)[0]))
        if name == "lognormal":
            median, sigma = _args(body, 2, name)
            parsed = LogNormal(parse_duration(median), float(sigma))
            if parsed.median <= 0 or parsed.sigma < 0:
                raise ValueError("the median must be above 0 and sigma not negative")
            return parsed
        if name == "uniform":
            low, high = (parse_duration(a) for a in _args(body, 2, name))
            if high < low:
                raise ValueError(f"{format_duration(high)} is below {format_duration(low)}")
            return Uniform(low, high)
    except ValueError as e:
        raise ValueError(f"{text!r}: {e}") from e
    raise ValueError(f"{text!r}: unknown distribution {name!r} (fixed, exp, lognormal, uniform)")


def parse_counts(text: str) -> Distribution:
    """A distribution of whole numbers (at least 1); ValueError naming the problem."""
    call = _CALL.fullmatch(text)
    try:
        if call is not None:
            name, body = call.groups()
            if name != "uniform":
                raise ValueError(f"unknown distribution {name!r} (a list of values, or uniform(LOW, HIGH))")
            low, high = (int(a) for a in _args(body, 2, name))
            if low < 1 or high < low:
                raise ValueError("expected 1 <= LOW <= HIGH")
            return WholeUniform(low, high)
        values: list[int] = []
        weights: list[float] = []
        for part in text.split(","):
            value, _, weight = part.strip().partition(":")
            values.append(int(value))
            weights.append(float(weight) if weight else 1.0)
        if min(values) < 1 or min(weights) < 0 or sum(weights) <= 0:
            raise ValueError("values must be at least 1 and weights not negative")
    except ValueError as e:
        raise ValueError(f"{text!r}: {e}") from e
    if len(values) == 1:
        return Fixed(values[0])
    return Choice(tuple(values), tuple(accumulate(weights)))
