"""Small arithmetic for fixes: divisors and the nearest candidates."""

import math
from typing import List, Sequence



def divisors(n: int) -> List[int]:
    """Positive divisors of ``n`` (n > 0), ascending."""
    small, large = [], []
    for d in range(1, math.isqrt(n) + 1):
        if n % d == 0:
            small.append(d)
            if d != n // d:
                large.append(n // d)
    return small + large[::-1]


def nearest(cands: Sequence[int], value: int, k: int = 2) -> List[int]:
    """Up to ``k`` candidates nearest ``value``: the closest below and above when both exist."""
    below = [c for c in cands if c < value]
    above = [c for c in cands if c > value]
    out = ([below[-1]] if below else []) + ([above[0]] if above else [])
    return out[:k] if out else sorted(cands, key=lambda c: abs(c - value))[:k]
