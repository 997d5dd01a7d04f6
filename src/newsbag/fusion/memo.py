"""A small memo of a pure function's last results, for work the variants of one page repeat."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["Recent", "ArrayKey", "read_only"]


class Recent:
    """The last `size` results of a pure function, by key; with `cost`, also no more than
    `budget` of their summed costs (bytes, say), the oldest going first.

    Keys hold the inputs' full bytes (`ArrayKey`), not a hash of them: two calls share a
    result only when their inputs are equal. Callers must not change a result they
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


class ArrayKey:
    """An array's bytes as (part of) a dict key: equal only to the same bytes, hashed from their
    length and ends. A bytes key is hashed whole, ~40 KB of a page's boxes and lines per call
    (1.5 % of a run's instructions); boxes that differ only inside just share a hash slot."""

    __slots__ = ("data", "_hash")

    def __init__(self, a: np.ndarray):
        self.data = a.tobytes()   # C order whatever the layout
        self._hash = hash((len(self.data), self.data[:64], self.data[-64:]))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArrayKey) and self.data == other.data


def read_only(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """The arrays, made read-only: a memo hands the same arrays to every caller."""
    for a in arrays:
        a.flags.writeable = False
    return arrays
