import numpy as np

from fusion.match.pairing import match_groups, similarity


def vector(**counts):
    order = ["GEMM", "Attention", "RMSNorm", "Elementwise", "Sort", "Memset"]
    return np.array([counts.get(t, 0) for t in order])


DECODE1 = vector(GEMM=160, Attention=40, RMSNorm=80, Elementwise=66, Sort=40)  # 386
DECODE2 = vector(GEMM=160, Attention=40, RMSNorm=80, Elementwise=34, Sort=40)  # 354
PIECE1 = vector(GEMM=2, RMSNorm=1, Elementwise=2)
PIECE2 = vector(GEMM=2, RMSNorm=1)


def test_sizes_386_vs_354_match():
    m = match_groups(np.vstack([DECODE1] * 8), np.vstack([DECODE2] * 8))
    assert m.pairs.tolist() == [[i, i] for i in range(8)]
    assert (m.similarity > 0.9).all()


def test_different_group_counts_leave_surplus_unmatched():
    m = match_groups(np.vstack([DECODE1] * 8), np.vstack([DECODE2] * 6))
    assert len(m.pairs) == 6 and m.unmatched1.tolist() == [6, 7] and len(m.unmatched2) == 0


def test_mixed_kinds_piecewise_beside_full_graphs():
    side1 = np.vstack([PIECE1, DECODE1, PIECE1, PIECE1, DECODE1])
    side2 = np.vstack([DECODE2, PIECE2, PIECE2, DECODE2, PIECE2])
    m = match_groups(side1, side2)
    pairs = {tuple(p) for p in m.pairs.tolist()}
    assert pairs == {(1, 0), (4, 3), (0, 1), (2, 2), (3, 4)}


def test_unrelated_groups_do_not_match():
    m = match_groups(np.vstack([vector(Sort=100)]), np.vstack([vector(GEMM=100, Attention=20)]))
    assert len(m.pairs) == 0 and m.unmatched1.tolist() == [0] and m.unmatched2.tolist() == [0]


def test_size_beyond_factor_two_never_matches():
    assert similarity(vector(GEMM=100), vector(GEMM=30)) == 0.0
    assert similarity(vector(GEMM=100), vector(GEMM=60)) > 0.6


def test_many_groups_is_fast():
    import time

    side1 = np.vstack([DECODE1] * 10000)
    side2 = np.vstack([DECODE2] * 9000)
    start = time.perf_counter()
    m = match_groups(side1, side2)
    assert len(m.pairs) == 9000 and time.perf_counter() - start < 2.0
