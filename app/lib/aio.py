"""Running independent awaitables side by side."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

A = TypeVar("A")
B = TypeVar("B")


async def both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Await `first` and `second` concurrently and return both results. Unlike a bare
    `asyncio.gather`, a failure is raised only once *both* have finished: neither is
    left running (on a database session its caller is about to roll back, say) when
    the other fails. The first failure, in argument order, is the one raised."""
    a, b = await asyncio.gather(first, second, return_exceptions=True)
    if isinstance(a, BaseException):
        raise a
    if isinstance(b, BaseException):
        raise b
    return a, b
