"""A small memo of a pure function's last results, for work the variants of one page repeat."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["Recent", "read_only"]


class Recent:
    """The last `size` results of a pure function, by key; with `cost`, also no more than
    `budget` of their summed costs (bytes, say), the oldest going first.

    Keys hold the inputs' full bytes (``ndarray.tobytes()``), not a hash of them: two calls
    share a result only when their inputs are equal. Callers must not change a result they
    get (copy it first when they hand it on).
    """

    def __init__(self, size: int, budget: float = float("inf"), cost: Callable[[Any], float] | None = None):
        self.size, self.budget, self.cost = size, budget, cost
        self.items: dict = {}
        self.costs: dict = {}

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        """The result for `key`, computed (and kept) on a miss."""
        hit = self.items.pop(key, None)
        if hit is None:
            hit = compute()
        self.put(key, hit)
        return hit

    def put(self, key: Any, value: Any) -> list[tuple[Any, Any]]:
        """Keep `value` for `key` as the newest entry; the oldest go past `size` or `budget`.

        Returns:
            The (key, value) entries that went, oldest first (`value` itself when it alone
            is over the budget).
        """
        self._drop(key)
        self.items[key] = value
        self.costs[key] = self.cost(value) if self.cost else 0.0
        gone = []
        while self.items and (len(self.items) > self.size or sum(self.costs.values()) > self.budget):
            oldest = next(iter(self.items))
            gone.append((oldest, self._drop(oldest)))
        return gone

    def take(self, key: Any) -> Any:
        """The value kept for `key`, removed; None when there is none."""
        return self._drop(key)

    def _drop(self, key: Any) -> Any:
        self.costs.pop(key, None)
        return self.items.pop(key, None)

    def clear(self) -> None:
        self.items.clear()
        self.costs.clear()


def read_only(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """The arrays, made read-only: a memo hands the same arrays to every caller."""
    for a in arrays:
        a.flags.writeable = False
    return arrays
