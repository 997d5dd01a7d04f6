"""A small memo of a pure function's last results, for work the variants of one page repeat."""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["Recent"]


class Recent:
    """The last `size` results of a pure function, by key.

    Keys hold the inputs' full bytes (``ndarray.tobytes()``), not a hash of them: two calls
    share a result only when their inputs are equal. Callers must not change a result they
    get (copy it first when they hand it on).
    """

    def __init__(self, size: int):
        self.size = size
        self.items: dict = {}

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        """The result for `key`, computed (and kept) on a miss."""
        hit = self.items.pop(key, None)
        if hit is None:
            hit = compute()
        self.put(key, hit)
        return hit

    def put(self, key: Any, value: Any) -> None:
        """Keep `value` for `key` as the newest entry; the oldest goes past `size`."""
        self.items.pop(key, None)
        self.items[key] = value
        if len(self.items) > self.size:
            del self.items[next(iter(self.items))]

    def take(self, key: Any) -> Any:
        """The value kept for `key`, removed; None when there is none."""
        return self.items.pop(key, None)

    def clear(self) -> None:
        self.items.clear()
