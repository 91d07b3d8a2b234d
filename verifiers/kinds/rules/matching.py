"""Maximum-weight one-to-one matching (the Hungarian method), for pairing predicted and reference boxes.

scipy's ``linear_sum_assignment`` computes the same pairs, but importing ``scipy.optimize`` costs 0.3-2 s, which
would land on the event loop the first time an inline grounding check matches several boxes; the matrices here are
at most a few hundred cells (box counts are capped), where this O(n^2 m) version takes microseconds.
"""
from __future__ import annotations

import math


def max_weight_matching(weights: list[list[float]]) -> list[tuple[int, int]]:
    """Row-column pairs (one per row or column, whichever is fewer) maximising the summed weight."""
    if not weights or not weights[0]:
        return []
    transposed = len(weights) > len(weights[0])
    matrix = [list(col) for col in zip(*weights)] if transposed else weights
    n, m = len(matrix), len(matrix[0])
    # Minimise cost = -weight with potentials u (rows) and v (columns); 1-based with a dummy column 0.
    u, v = [0.0] * (n + 1), [0.0] * (m + 1)
    owner = [0] * (m + 1)
    way = [0] * (m + 1)
    for row in range(1, n + 1):
        owner[0] = row
        col0 = 0
        best = [math.inf] * (m + 1)
        used = [False] * (m + 1)
        while True:
            used[col0] = True
            r, delta, col1 = owner[col0], math.inf, 0
            for col in range(1, m + 1):
                if not used[col]:
                    reduced = -matrix[r - 1][col - 1] - u[r] - v[col]
                    if reduced < best[col]:
                        best[col], way[col] = reduced, col0
                    if best[col] < delta:
                        delta, col1 = best[col], col
            for col in range(m + 1):
                if used[col]:
                    u[owner[col]] += delta
                    v[col] -= delta
                else:
                    best[col] -= delta
            col0 = col1
            if owner[col0] == 0:
                break
        while col0:
            prev = way[col0]
            owner[col0] = owner[prev]
            col0 = prev
    pairs = [(owner[col] - 1, col - 1) for col in range(1, m + 1) if owner[col]]
    return sorted((c, r) for r, c in pairs) if transposed else sorted(pairs)
