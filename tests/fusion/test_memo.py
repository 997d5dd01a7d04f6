from newsbag.fusion.memo import Recent


def test_recent_keeps_the_newest_within_its_size_and_budget():
    calls = []

    def compute(v):
        calls.append(v)
        return v

    memo = Recent(2)
    assert memo.get(b"a", lambda: compute("a")) == "a"
    assert memo.get(b"a", lambda: compute("other")) == "a"   # kept: computed once
    memo.get(b"b", lambda: compute("b"))
    memo.get(b"a", lambda: compute("a"))                      # a is the newest again
    memo.get(b"c", lambda: compute("c"))                      # b, the oldest, goes
    assert list(memo.items) == [b"a", b"c"] and calls == ["a", "b", "c"]
    assert memo.take(b"a") == "a" and memo.take(b"a") is None

    sized = Recent(10, budget=10, cost=len)
    for key in ("xxxx", "yyyy", "zzzz"):                      # 12 > 10: the first goes
        sized.put(key, key)
    assert list(sized.items) == ["yyyy", "zzzz"]
    assert sized.put("big", "b" * 11) == [("yyyy", "yyyy"), ("zzzz", "zzzz"), ("big", "b" * 11)]
    assert not sized.items                                    # over the budget alone: nothing kept


def test_array_keys_are_equal_only_for_the_same_bytes():
    import numpy as np

    from newsbag.fusion.memo import ArrayKey

    a = np.arange(400, dtype=np.float64).reshape(-1, 4)
    b = a.copy()
    b[50, 2] += 0.5                       # differs only inside: the same hash, not the same key
    memo = Recent(4)
    assert memo.get(ArrayKey(a), lambda: "a") == "a"
    assert memo.get(ArrayKey(a.copy()), lambda: "other") == "a"
    assert hash(ArrayKey(b)) == hash(ArrayKey(a)) and ArrayKey(b) != ArrayKey(a)
    assert memo.get(ArrayKey(b), lambda: "b") == "b"
    assert memo.get((ArrayKey(a[:0]), 1.0), lambda: "empty") == "empty"
