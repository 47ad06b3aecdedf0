import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from kernels import make_trace, steps

from fusion.classify.names import KERNEL_TYPES
from fusion.match.groups import View, correlation_groups, joint_counts, type_codes, unique_rows

TYPES = list(KERNEL_TYPES)


def groups_of(trace, min_group_size=3):
    return correlation_groups(trace.kernels, type_codes(trace.kernels, TYPES), len(TYPES), min_group_size)


def test_groups_sizes_order_counts_and_residual():
    step = [("g", "GEMM"), ("a", "Attention"), ("g", "GEMM")]
    kernels = steps(step, 2, first_correlation=10) + [("m", "Memset", 1.0, -1), ("e", "Elementwise", 1.0, 99)]
    groups = groups_of(make_trace(kernels))
    assert groups.table["correlation"].tolist() == [10, 11]
    assert groups.table["size"].tolist() == [3, 3]
    assert groups.table["order"].tolist() == [0, 1]
    assert groups.total_groups == 3
    gemm = TYPES.index("GEMM")
    assert groups.type_counts[:, gemm].tolist() == [2, 2]
    assert groups.rows(1).tolist() == [3, 4, 5]
    assert groups.residual_rows.tolist() == [6, 7]
    assert np.allclose(groups.table["kernel_time_us"], 15.0)
    assert groups.table["end_us"].iloc[0] > groups.table["start_us"].iloc[0]


def test_eager_trace_has_no_significant_groups():
    groups = groups_of(make_trace(steps([("g", "GEMM"), ("a", "Attention")], 5, eager=True)), min_group_size=2)
    assert len(groups) == 0 and groups.type_counts.shape == (0, len(TYPES))
    assert len(groups.residual_rows) == 10


def test_interleaved_groups_keep_time_order_within_group():
    kernels = [("a", "GEMM", 1.0, 1), ("b", "Attention", 1.0, 2), ("c", "Softmax", 1.0, 1), ("d", "Sort", 1.0, 2)]
    groups = groups_of(make_trace(kernels), min_group_size=2)
    assert groups.rows(0).tolist() == [0, 2] and groups.rows(1).tolist() == [1, 3]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(0, 40), st.integers(1, 5), st.integers(0, 3))
def test_unique_rows_orders_like_numpy_unique(n_rows, n_columns, seed):
    """Kinds depend on the order of distinct count vectors: lexicographic, as np.unique(axis=0) gives."""
    rows = np.random.default_rng(seed).integers(0, 3, size=(n_rows, n_columns))
    distinct, inverse, counts = unique_rows(rows)
    expected, expected_inverse, expected_counts = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    assert distinct.tolist() == expected.tolist()
    assert inverse.tolist() == expected_inverse.ravel().tolist() and counts.tolist() == expected_counts.tolist()


def test_groups_split_by_eager_kernels_and_revisited_keep_all_their_kernels():
    """A correlation id that recurs after other kernels is one group with every kernel, in time order."""
    kernels = [
        ("a", "GEMM", 1.0, 7),
        ("b", "Attention", 1.0, 7),
        ("e", "Memset", 1.0, -1),
        ("c", "Softmax", 1.0, 7),
        ("d", "Sort", 1.0, 8),
        ("f", "GEMM", 1.0, 7),
        ("g", "Sort", 1.0, 8),
    ]
    groups = groups_of(make_trace(kernels), min_group_size=2)
    assert groups.table["correlation"].tolist() == [7, 8]
    assert groups.rows(0).tolist() == [0, 1, 3, 5] and groups.rows(1).tolist() == [4, 6]
    assert groups.table["first_index"].tolist() == [0, 4] and groups.residual_rows.tolist() == [2]


def _view_groups(trace, rows, min_group_size):
    """The groups of the trace restricted to its view of `rows` (None when the view cuts one), and the view's own."""
    view = trace.subset(rows, "a view")
    kept = View.of(rows, len(trace.kernels), view.kernels["correlation"].to_numpy())
    return groups_of(trace, min_group_size).within(kept), groups_of(view, min_group_size)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.integers(1, 60), st.integers(0, 2**16), st.sampled_from(["range", "ids", "rows"]))
def test_groups_within_a_view_are_the_views_own_groups(n_kernels, seed, how):
    """A view that cuts no group (a range of rows, or whole correlation ids) has the trace's groups, renumbered;
    one that cuts a group (random rows) gets None, unless it happens to cut none."""
    rng = np.random.default_rng(seed)
    correlations = np.sort(rng.integers(-1, 8, n_kernels))
    correlations[rng.random(n_kernels) < 0.2] = -1
    types = rng.choice(["GEMM", "Attention", "Softmax"], n_kernels)
    trace = make_trace([(f"k{t}", t, float(rng.integers(1, 9)), int(c)) for t, c in zip(types, correlations)])
    if how == "range":
        start = int(rng.integers(0, n_kernels))
        rows = np.arange(start, int(rng.integers(start + 1, n_kernels + 1)))
    elif how == "ids":
        rows = np.flatnonzero(np.isin(correlations, rng.choice(np.arange(-1, 8), 4)))
    else:
        rows = np.flatnonzero(rng.random(n_kernels) < 0.6)
    if not len(rows):
        return
    within, own = _view_groups(trace, rows, min_group_size=3)
    sizes = np.bincount(correlations[correlations >= 0] + 0, minlength=8)
    kept_sizes = np.bincount(correlations[rows][correlations[rows] >= 0], minlength=8)
    cut = ((kept_sizes > 0) & (kept_sizes < sizes) & (sizes >= 3)).any()
    assert (within is None) == bool(cut)
    if within is None:
        return
    assert within.table.equals(own.table)
    for field in ("type_counts", "type_time_us", "kernel_rows", "offsets", "residual_rows"):
        assert np.array_equal(getattr(within, field), getattr(own, field)), field
    assert within.total_groups == own.total_groups


def test_a_range_view_between_the_kernels_of_a_group_takes_it_as_cut():
    """A view of rows 1-3 keeps none of group 7 (rows 0 and 4) but lies inside its span: decided on first and last
    rows, it counts as cut (the view is grouped anew). A view of rows 0 and 4 (a mask) keeps group 7 whole."""
    kernels = [("a", "GEMM", 1.0, 7), ("b", "GEMM", 1.0, 8), ("c", "GEMM", 1.0, 8), ("d", "GEMM", 1.0, 8)]
    trace = make_trace([*kernels, ("e", "Attention", 1.0, 7)])
    assert _view_groups(trace, np.arange(1, 4), min_group_size=2)[0] is None
    within, own = _view_groups(trace, np.array([0, 4]), min_group_size=2)
    assert within is not None and within.table["correlation"].tolist() == [7] and within.table.equals(own.table)
    assert within.kernel_rows.tolist() == own.kernel_rows.tolist() == [0, 1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 4), st.integers(-1, 6)), max_size=60))
def test_joint_counts_count_each_pair_and_skip_pairs_without_a_code(pairs: list[tuple[int, int]]) -> None:
    first = np.array([a for a, _ in pairs], dtype=np.int8)
    second = np.array([b for _, b in pairs], dtype=np.int16)
    expected = np.zeros((5, 7), dtype=np.int64)
    for a, b in pairs:
        if a >= 0 and b >= 0:
            expected[a, b] += 1
    assert np.array_equal(joint_counts(first, second, (5, 7)), expected)
