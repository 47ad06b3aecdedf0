"""One-to-one matching of significant groups across two traces.

Fusion changes group sizes (386 kernels on one side, 354 on the other), so groups are not bucketed
by size. Instead:
1. within each trace, groups are clustered into *kinds* by their per-type count vectors
   (identical decode steps share a kind; prefill, piecewise and full graphs get their own);
2. kinds are matched across traces by composition similarity (cosine of count vectors, type-presence
   overlap, size ratio), best pairs first; a leftover kind joins its most similar counterpart;
3. inside a matched kind pair, the i-th group of one side pairs with the i-th of the other
   (execution order); the surplus of the longer side stays unmatched.
Cost: O(groups x kinds), with kinds small in practice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fusion.match.groups import Groups, unique_rows

KIND_SIMILARITY = 0.9
"""Two groups of one trace are the same kind at this similarity or above."""
MIN_PAIR_SIMILARITY = 0.5
"""Groups (or kinds) across traces below this similarity are not matched."""
MAX_SIZE_RATIO = 2.0
"""Groups whose sizes differ by more than this factor are never matched (fusion changes sizes by < 50%)."""


@dataclass
class Matching:
    """Matched group positions (rows of Groups.table) with their similarity, and what stayed unmatched."""

    pairs: np.ndarray
    similarity: np.ndarray
    kinds1: np.ndarray
    kinds2: np.ndarray
    unmatched1: np.ndarray
    unmatched2: np.ndarray


def similarity(a: np.ndarray, b: np.ndarray, max_size_ratio: float = MAX_SIZE_RATIO) -> np.ndarray:
    """Composition similarity in [0, 1] of type count vectors along the last axis (broadcasting).

    0.6 x cosine of the counts + 0.2 x overlap of the types present + 0.2 x size ratio; 0 when the
    sizes differ by more than `max_size_ratio`.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    cosine = _ratio((a * b).sum(-1), norms)
    pa, pb = a > 0, b > 0
    presence = _ratio((pa & pb).sum(-1), (pa | pb).sum(-1))
    sa, sb = a.sum(-1), b.sum(-1)
    size = _ratio(np.minimum(sa, sb), np.maximum(sa, sb))
    return np.where(size * max_size_ratio >= 1.0, 0.6 * cosine + 0.2 * presence + 0.2 * size, 0.0)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num, den = np.broadcast_arrays(np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64))
    return np.divide(num, den, out=np.zeros(num.shape), where=den > 0)


def kinds(counts: np.ndarray, threshold: float = KIND_SIMILARITY) -> tuple[np.ndarray, np.ndarray]:
    """Cluster groups by composition: (kind label per group, mean count vector per kind)."""
    if len(counts) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros((0, counts.shape[1]))
    variants, inverse, weight = unique_rows(counts)
    kind_of = np.full(len(variants), -1, dtype=np.int64)
    reps: list[np.ndarray] = []
    for v in np.argsort(-weight, kind="stable"):
        if reps:
            scores = similarity(variants[v], np.vstack(reps))
            best = int(np.argmax(scores))
            if scores[best] >= threshold:
                kind_of[v] = best
                continue
        kind_of[v] = len(reps)
        reps.append(variants[v])
    labels = kind_of[inverse]
    sums = np.zeros((len(reps), counts.shape[1]))
    np.add.at(sums, kind_of, variants * weight[:, None])
    return labels, sums / np.bincount(labels, minlength=len(reps))[:, None]


def match_kinds(reps1: np.ndarray, reps2: np.ndarray, threshold: float = MIN_PAIR_SIMILARITY) -> list[tuple[int, int]]:
    """Kind pairs: one-to-one best-first, then each leftover kind joins its most similar counterpart."""
    if len(reps1) == 0 or len(reps2) == 0:
        return []
    scores = similarity(reps1[:, None, :], reps2[None, :, :])
    pairs: list[tuple[int, int]] = []
    used1, used2 = set(), set()
    for flat in np.argsort(-scores, axis=None, kind="stable"):
        k1, k2 = divmod(int(flat), scores.shape[1])
        if scores[k1, k2] < threshold:
            break
        if k1 not in used1 and k2 not in used2:
            pairs.append((k1, k2))
            used1.add(k1)
            used2.add(k2)
    pairs += [
        (k1, int(np.argmax(scores[k1])))
        for k1 in range(len(reps1))
        if k1 not in used1 and scores[k1].max() >= threshold
    ]
    pairs += [
        (int(np.argmax(scores[:, k2])), k2)
        for k2 in range(len(reps2))
        if k2 not in used2 and scores[:, k2].max() >= threshold
    ]
    return pairs


def match_groups(counts1: np.ndarray, counts2: np.ndarray, threshold: float = MIN_PAIR_SIMILARITY) -> Matching:
    """Match groups (rows of two groups x types count matrices, each in execution order)."""
    kinds1, reps1 = kinds(counts1)
    kinds2, reps2 = kinds(counts2)
    bundle1, bundle2 = _bundles(match_kinds(reps1, reps2, threshold), len(reps1), len(reps2))
    pairs = _pairs_by_order(bundle1[kinds1], bundle2[kinds2])
    scores = similarity(counts1[pairs[:, 0]], counts2[pairs[:, 1]]) if len(pairs) else np.zeros(0)
    pairs, scores = pairs[scores >= threshold], scores[scores >= threshold]
    return Matching(
        pairs=pairs,
        similarity=scores,
        kinds1=kinds1,
        kinds2=kinds2,
        unmatched1=_unpaired(len(counts1), pairs[:, 0]),
        unmatched2=_unpaired(len(counts2), pairs[:, 1]),
    )


def candidate_size(min_group_size: int) -> int:
    """The smallest group that may pair with a significant one: fusion shrinks groups by up to MAX_SIZE_RATIO."""
    return max(1, math.ceil(min_group_size / MAX_SIZE_RATIO))


def match_across_threshold(
    groups1: Groups, groups2: Groups, min_group_size: int, threshold: float = MIN_PAIR_SIMILARITY
) -> tuple[Groups, Groups, Matching]:
    """Match groups of at least candidate_size kernels; keep a pair when either side is significant.

    A decode graph of 55 kernels on one side and 45 on the fused side is one pair across a threshold of 50;
    a pair with both sides below it is dropped, and unpaired small groups return to the eager stream.
    """
    matching = match_groups(groups1.type_counts, groups2.type_counts, threshold)
    big1, big2 = (g.table["size"].to_numpy() >= min_group_size for g in (groups1, groups2))
    pairs = matching.pairs
    kept = big1[pairs[:, 0]] | big2[pairs[:, 1]]
    keep1, keep2 = big1.copy(), big2.copy()
    keep1[pairs[kept, 0]] = True
    keep2[pairs[kept, 1]] = True
    return _subset(groups1, groups2, matching, kept, (keep1, keep2))


def keep_pairs(
    groups1: Groups, groups2: Groups, matching: Matching, kept: np.ndarray
) -> tuple[Groups, Groups, Matching]:
    """The matching with only the `kept` pairs (bool per pair); the groups of the other pairs join the
    kernels outside groups."""
    keep = []
    for side, groups in enumerate((groups1, groups2)):
        mask = np.ones(len(groups), dtype=bool)
        mask[matching.pairs[~kept, side]] = False
        keep.append(mask)
    return _subset(groups1, groups2, matching, kept, (keep[0], keep[1]))


def _subset(
    groups1: Groups, groups2: Groups, matching: Matching, kept: np.ndarray, keep: tuple[np.ndarray, np.ndarray]
) -> tuple[Groups, Groups, Matching]:
    """The `keep` groups of each side (bool per group) and the `kept` pairs among them, renumbered."""
    keep1, keep2 = keep
    pairs = matching.pairs[kept]
    new_pairs = np.column_stack([(np.cumsum(keep1) - 1)[pairs[:, 0]], (np.cumsum(keep2) - 1)[pairs[:, 1]]])
    new_pairs = new_pairs.astype(np.int64).reshape(-1, 2)
    kept_matching = Matching(
        pairs=new_pairs,
        similarity=matching.similarity[kept],
        kinds1=matching.kinds1[keep1],
        kinds2=matching.kinds2[keep2],
        unmatched1=_unpaired(int(keep1.sum()), new_pairs[:, 0]),
        unmatched2=_unpaired(int(keep2.sum()), new_pairs[:, 1]),
    )
    return groups1.select(keep1), groups2.select(keep2), kept_matching


def _unpaired(n: int, paired: np.ndarray) -> np.ndarray:
    """Positions 0 .. n - 1 that are not in `paired`, ascending."""
    free = np.ones(n, dtype=bool)
    free[paired] = False
    return np.flatnonzero(free)


def _bundles(kind_pairs: list[tuple[int, int]], n1: int, n2: int) -> tuple[np.ndarray, np.ndarray]:
    """Connected kinds (through kind pairs) share a bundle label; kinds in no pair get -1."""
    parent = list(range(n1 + n2))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for k1, k2 in kind_pairs:
        parent[root(k1)] = root(n1 + k2)
    paired = {k1 for k1, _ in kind_pairs} | {n1 + k2 for _, k2 in kind_pairs}
    labels = np.array([root(x) if x in paired else -1 for x in range(n1 + n2)], dtype=np.int64)
    return labels[:n1], labels[n1:]


def _pairs_by_order(bundles1: np.ndarray, bundles2: np.ndarray) -> np.ndarray:
    """Within each bundle, pair the i-th group of side 1 with the i-th of side 2 (vectorised)."""
    stride = len(bundles1) + len(bundles2) + 1
    key1 = np.where(bundles1 >= 0, bundles1 * stride + _rank_within(bundles1), -1)
    key2 = np.where(bundles2 >= 0, bundles2 * stride + _rank_within(bundles2), -1)
    _, g1, g2 = np.intersect1d(key1, key2, assume_unique=False, return_indices=True)
    keep = key1[g1] >= 0
    g1, g2 = g1[keep], g2[keep]
    order = np.argsort(g1, kind="stable")
    return np.column_stack([g1[order], g2[order]]).astype(np.int64).reshape(-1, 2)


def _rank_within(labels: np.ndarray) -> np.ndarray:
    """Position of each element among the elements with the same label (0, 1, 2, ... in order)."""
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order]
    starts = np.flatnonzero(np.r_[True, sorted_labels[1:] != sorted_labels[:-1]]) if len(labels) else np.zeros(0, int)
    run_start = np.repeat(starts, np.diff(np.r_[starts, len(labels)]))
    rank = np.empty(len(labels), dtype=np.int64)
    rank[order] = np.arange(len(labels)) - run_start
    return rank
