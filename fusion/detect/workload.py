"""Do the two traces run the same workload? What they say they ran, compared before any finding.

Kernel counts cannot tell two models apart (two diffusion transformers launch about as many kernels, as much
attention); what the traces record about the model can. The strongest signal both traces carry decides:

1. model classes: the root `nn.Module` classes the kernels were launched under (BertLMHeadModel,
   FluxTransformer2DModel), where both traces record modules for most kernels;
2. else op-call sequences: the top-level op calls aligned in order (per step when the step counts differ), where
   both traces launch most kernels from eager op calls;
3. else the operation mix: which operation types the kernels perform and in what amounts (fused components
   count as work, so fusions change neither), for traces without a CPU side that covers both.

Beside it, the layers: the instances of each repeated module class both traces record (a 24-layer and a 36-layer
model of one family share every class), else the attention operations per forward step. Each signal is a similarity in
[0, 1] with its own named threshold (Thresholds.min_*_similarity); below any, the pair is not the same workload.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fusion.detect.evidence import Side
from fusion.detect.thresholds import Thresholds
from fusion.match.align import UNKNOWN_TYPE
from fusion.match.op_calls import EAGER_LAUNCH, class_path
from fusion.model.ops import MODULE_SEPARATOR
from fusion.model.phases import recorded_steps
from fusion.vocabulary import BACKWARD, OPTIMIZER

MODEL, OP_CALLS, MIX, LAYERS = "model classes", "op-call sequences", "operation mix", "layers"
"""The signals, strongest first (MODEL, OP_CALLS, MIX decide in that order; LAYERS is checked beside them)."""
MIX_LEFT_OUT = frozenset({"Memset", "MemCopy"})
"""Types left out of the operation mix: fills and copies differ by vendor (unknown kernels stay: they may be any
operation a trace lacks)."""
MIX_SUPPORT = 0.01
"""A type is in a trace's set of operations when it makes at least this share of them."""
SHOWN = 3
"""Classes, ops or types named per trace in the evidence."""


@dataclass(frozen=True)
class Signal:
    name: str
    similarity: float
    threshold: float
    evidence: str

    @property
    def passes(self) -> bool:
        return self.similarity >= self.threshold


@dataclass(frozen=True)
class WorkloadIdentity:
    """The signals compared, the one that decides, and whether the traces run the same workload."""

    signals: list[Signal] = field(default_factory=list)

    @property
    def deciding(self) -> Signal | None:
        """The failing signal furthest below its threshold, else the strongest signal compared."""
        failing = [s for s in self.signals if not s.passes]
        if failing:
            return min(failing, key=lambda s: s.similarity / s.threshold)
        return self.signals[0] if self.signals else None

    @property
    def same(self) -> bool:
        return all(s.passes for s in self.signals)

    def checks(self) -> dict[str, object]:
        deciding = self.deciding
        return {
            "workload_similarity": round(deciding.similarity, 4) if deciding else None,
            "workload_signal": deciding.name if deciding else "",
            "workload_signals": {s.name: round(s.similarity, 4) for s in self.signals},
        }


def workload_identity(
    sides: tuple[Side, Side], types: list[str], aligned_calls: int, calls: tuple[int, int], limits: Thresholds
) -> WorkloadIdentity:
    """Compare what both traces say they ran (`types`: the type list the sides' codes index); `aligned_calls` of
    `calls` top-level op calls aligned (fusion.match.op_calls)."""
    views = (_View.of(sides[0], types), _View.of(sides[1], types))
    coverage = limits.workload_signal_coverage
    signals = []
    if min(v.module_share for v in views) >= coverage:
        signals.append(_model_classes(views, limits))
    elif min(v.eager_share for v in views) >= coverage and min(calls) > 0:
        signals.append(_op_call_sequences(views, aligned_calls, calls, limits))
    elif (mix := _operation_mix(views, limits)) is not None:
        signals.append(mix)
    layers = _module_layers(views, limits) if min(v.module_share for v in views) >= coverage else None
    layers = layers or _attention_layers(views, limits)
    return WorkloadIdentity(signals + ([layers] if layers else []))


@dataclass(frozen=True)
class _View:
    """What one trace says it ran, read once from its kernel table."""

    side: Side
    types: list[str]
    modules: pd.Series
    """Kernels per module path as recorded (instance numbers kept); '' for kernels without one."""
    module_share: float
    eager_share: float
    """Share of kernels launched eagerly by a top-level op call."""
    steps: int

    @classmethod
    def of(cls, side: Side, types: list[str]) -> _View:
        kernels = side.trace.kernels
        total = max(len(kernels), 1)
        modules = kernels["module"].value_counts(sort=False) if "module" in kernels.columns else pd.Series(dtype=int)
        modules = modules[(modules.index.astype(str) != "") & (modules > 0)]
        recorded = int(modules.sum())
        eager = 0
        if "op_call" in kernels.columns:
            eager = int(((kernels["op_call"].to_numpy() >= 0) & (kernels["launch"] == EAGER_LAUNCH).to_numpy()).sum())
        return cls(side, types, modules, recorded / total, eager / total, recorded_steps(kernels))

    def operations(self) -> np.ndarray:
        """(name code, type code) -> kernels that are operations of the mix (no split helper, no type of
        MIX_LEFT_OUT)."""
        counts = self.side.name_type_counts
        left_out = np.array([t in MIX_LEFT_OUT for t in self.types[: counts.shape[1]]], dtype=bool)
        return np.where(self.side.helper_names[:, None] | left_out[None, :], 0, counts)

    def label(self) -> str:
        return f"trace {self.side.number}"

    def roots(self) -> Counter[str]:
        """Kernels per root module class (the outermost nn.Module, instance number dropped)."""
        found: Counter[str] = Counter()
        for path, count in self.modules.items():
            found[class_path(str(path)).split(MODULE_SEPARATOR)[0]] += int(count)
        return found

    def instances(self) -> dict[str, int]:
        """Per module class path: how many instances the trace records (24 decoder layers)."""
        paths: dict[str, set[str]] = {}
        for path in self.modules.index:
            paths.setdefault(class_path(str(path)), set()).add(str(path))
        return {k: len(v) for k, v in paths.items()}


def _shares(counts: Counter[str]) -> dict[str, float]:
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()} if total else {}


def _overlap(a: dict[str, float], b: dict[str, float]) -> float:
    """Histogram intersection of two share distributions: 1 when they are the same, 0 when disjoint."""
    return sum(min(a.get(k, 0.0), b.get(k, 0.0)) for k in a.keys() | b.keys())


def _named(shares: dict[str, float]) -> str:
    top = sorted(shares.items(), key=lambda kv: -kv[1])[:SHOWN]
    return ", ".join(f"{name} ({share:.0%})" for name, share in top) or "nothing"


def _model_classes(views: tuple[_View, _View], limits: Thresholds) -> Signal:
    shares = [_shares(v.roots()) for v in views]
    value = _overlap(*shares)
    return Signal(
        MODEL,
        value,
        limits.min_model_similarity,
        f"model classes {value:.0%} alike: trace 1 runs {_named(shares[0])}, trace 2 {_named(shares[1])}"
        " (root nn.Module classes, share of kernels)",
    )


def _op_call_sequences(views: tuple[_View, _View], aligned: int, calls: tuple[int, int], limits: Thresholds) -> Signal:
    """Where both traces record steps: aligned same-op calls over the calls of the longer trace per step, times the
    steps both have (a capture of four steps against one of the same workload aligns one step's calls, all of
    them). Without steps a longer capture may repeat the workload: the share of the shorter trace's calls that
    align, at most the overlap of the two traces' op mixes."""
    ops = [_shares(_top_ops(v)) for v in views]
    named = f"trace 1 runs {_named(ops[0])}, trace 2 {_named(ops[1])}"
    counted = f"{aligned} of {calls[0]} vs {calls[1]} top-level op calls align"
    if all(v.steps for v in views):
        steps = (views[0].steps, views[1].steps)
        expected = min(steps) * max(calls[0] / steps[0], calls[1] / steps[1])
        value = min(1.0, aligned / expected)
        per_step = f" in {steps[0]} vs {steps[1]} steps"
        return Signal(
            OP_CALLS,
            value,
            limits.min_op_call_similarity,
            f"op-call sequences {value:.0%} alike: {counted}{per_step}; {named}",
        )
    mix = _overlap(*ops)
    value = min(aligned / min(calls), mix)
    return Signal(
        OP_CALLS,
        value,
        limits.min_op_call_similarity,
        f"op-call sequences {value:.0%} alike: {counted} (no steps recorded: the shorter trace's calls align"
        f" {aligned / min(calls):.0%}, the op mixes overlap {mix:.0%}); {named}",
    )


def _top_ops(view: _View) -> Counter[str]:
    """Top-level op calls per op name (each call counted once, at its first kernel)."""
    kernels = view.side.trace.kernels
    call = kernels["op_call"].to_numpy()
    _, first = np.unique(call, return_index=True)
    first = first[call[first] >= 0]
    top = kernels["op_top"].cat
    per_code = np.bincount(top.codes.to_numpy()[first], minlength=len(top.categories))
    return Counter({str(top.categories[c]): int(per_code[c]) for c in np.flatnonzero(per_code).tolist()})


def _operation_mix(views: tuple[_View, _View], limits: Thresholds) -> Signal | None:
    """Do the traces run the same operations in similar amounts? The mean of two overlaps of the kernels that are
    operations (no split helpers, fills or copies): of their type shares, and of the sets of types that make at
    least MIX_SUPPORT of them. A fused kernel also counts the operations it performs (its fused components), so a
    fusion changes neither; an unknown kernel may be any operation the trace lacks. None when a trace has no such
    kernel. Between traces of one vendor the overlap of kernel-name families is given as evidence."""
    shares = [_work(v) for v in views]
    if not all(shares):
        return None
    amounts, types = _overlap_with_unknown(*shares), _type_set_overlap(*shares)
    value = (amounts + types) / 2
    known = [{t: p for t, p in share.items() if t != UNKNOWN_TYPE} for share in shares]
    evidence = (
        f"operation mix {value:.0%} alike (amounts {amounts:.0%}, types {types:.0%}): trace 1 runs"
        f" {_named(known[0])}, trace 2 {_named(known[1])}"
    )
    if views[0].side.trace.platform == views[1].side.trace.platform:
        evidence += f"; kernel-name families {_overlap(*(_families(v) for v in views)):.0%} alike"
    return Signal(
        MIX, value, limits.min_operation_mix_similarity, evidence + " (no CPU side that covers both traces' kernels)"
    )


def _work(view: _View) -> dict[str, float]:
    """Shares of the operations a trace's kernels perform: each operation kernel's type, plus its fused components."""
    side, operations = view.side, view.operations()
    counts: Counter[str] = Counter()
    per_type = operations.sum(axis=0)
    counts.update({view.types[c]: int(per_type[c]) for c in np.flatnonzero(per_type).tolist()})
    per_name = operations.sum(axis=1)
    for code in np.flatnonzero(per_name).tolist():
        for component in side.fused_components[code]:
            if component not in MIX_LEFT_OUT:
                counts[component] += int(per_name[code])
    return _shares(counts)


def _families(view: _View) -> dict[str, float]:
    side = view.side
    per_name = view.operations().sum(axis=1)
    counts: Counter[str] = Counter()
    for code in np.flatnonzero(per_name).tolist():
        counts[side.families[code]] += int(per_name[code])
    return _shares(counts)


def _overlap_with_unknown(a: dict[str, float], b: dict[str, float]) -> float:
    """_overlap of two share distributions where a side's unknown share may stand for what it lacks of the other's
    known types, and the unknown shares left for each other."""
    p, q = dict(a), dict(b)
    u, v = p.pop(UNKNOWN_TYPE, 0.0), q.pop(UNKNOWN_TYPE, 0.0)
    lacks_p = sum(max(share - p.get(t, 0.0), 0.0) for t, share in q.items())
    lacks_q = sum(max(share - q.get(t, 0.0), 0.0) for t, share in p.items())
    covered_p, covered_q = min(u, lacks_p), min(v, lacks_q)
    return _overlap(p, q) + covered_p + covered_q + min(u - covered_p, v - covered_q)


def _type_set_overlap(a: dict[str, float], b: dict[str, float]) -> float:
    """Jaccard overlap of the known types that make at least MIX_SUPPORT of each trace's operations; a type only
    one trace runs counts as shared when the other's unknown share could hold it."""
    sets = [{t for t, share in x.items() if share >= MIX_SUPPORT and t != UNKNOWN_TYPE} for x in (a, b)]
    union = sets[0] | sets[1]
    if not union:
        return 1.0
    shared = len(sets[0] & sets[1])
    for mine, other, unknown in ((sets[0], b, a.get(UNKNOWN_TYPE, 0.0)), (sets[1], a, b.get(UNKNOWN_TYPE, 0.0))):
        lacking = sorted((other[t] for t in union - mine if t in other), reverse=False)
        for share in lacking:
            if share > unknown:
                break
            unknown -= share
            shared += 1
    return min(1.0, shared / len(union))


def _module_layers(views: tuple[_View, _View], limits: Thresholds) -> Signal | None:
    """Instances of each repeated module class path both traces record (a decoder layer): min over max, summed over
    those paths; None when they share no repeated class (a compiled graph module hides the layers)."""
    instances = [v.instances() for v in views]
    shared = sorted(p for p in instances[0].keys() & instances[1].keys() if max(instances[0][p], instances[1][p]) > 1)
    if not shared:
        return None
    low = sum(min(instances[0][p], instances[1][p]) for p in shared)
    high = sum(max(instances[0][p], instances[1][p]) for p in shared)
    value = low / high
    most = min(shared, key=lambda p: (-abs(instances[0][p] - instances[1][p]), p.count(MODULE_SEPARATOR), p))
    return Signal(
        LAYERS,
        value,
        limits.min_layer_similarity,
        f"layers {value:.0%} alike: of the module classes both traces record, {most} has"
        f" {instances[0][most]} vs {instances[1][most]} instances",
    )


def _attention_layers(views: tuple[_View, _View], limits: Thresholds) -> Signal | None:
    """Attention operations per forward step (one per layer in a transformer), where both traces record steps and
    run attention; None otherwise."""
    per_step = []
    for view in views:
        if not view.steps:
            return None
        side, kernels = view.side, view.side.trace.kernels
        forward = ~kernels["phase"].isin((BACKWARD, OPTIMIZER)).to_numpy() if "phase" in kernels.columns else True
        is_attention = side.codes == view.types.index("Attention") if "Attention" in view.types else False
        attention = int((is_attention & ~side.helper_names[side.names] & forward).sum())
        if not attention:
            return None
        per_step.append(attention / view.steps)
    value = min(per_step) / max(per_step)
    return Signal(
        LAYERS,
        value,
        limits.min_layer_similarity,
        f"layers {value:.0%} alike: {per_step[0]:.4g} vs {per_step[1]:.4g} attention operations per forward step"
        " (one per transformer layer)",
    )
