"""One bracket for the checks' context variables: a value set for a block, the previous one back after it."""
from __future__ import annotations

import contextvars
from contextlib import contextmanager
from typing import Iterator, TypeVar

T = TypeVar("T")


@contextmanager
def bound(var: contextvars.ContextVar[T], value: T) -> Iterator[T]:
    """`var` reads `value` inside the block (this thread and context only); yields the value."""
    token = var.set(value)
    try:
        yield value
    finally:
        var.reset(token)
