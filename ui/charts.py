"""Plotly figures shared by the pages, and the colours of types and sides. No streamlit here.

Every piece of trace text a figure shows (labels, kernel names) goes through `text.plotly`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from fusion.classify import KERNEL_TYPES
from fusion.result import ONLY_IN, side_column
from ui import text

OTHER_TYPE = "Other"
_TYPE_PALETTE = {
    "GEMM": "#1F77B4", "MoE_GEMM": "#17BECF", "Attention": "#FF7F0E", "KV_Cache": "#FFBB78",
    "Communication": "#8C564B", "Convolution": "#C49C94", "RMSNorm": "#9467BD", "LayerNorm": "#C5B0D5",
    "BatchNorm": "#7B4173", "GroupNorm": "#A55194", "SwiGLU": "#2CA02C", "GELU": "#98DF8A", "ReLU": "#637939",
    "RoPE": "#BCBD22", "MoE_Routing": "#E377C2", "Softmax": "#D62728", "Embedding": "#AD494A",
    "Quantize": "#E7BA52", "Reduce": "#843C39", "Sort": "#393B79", "Scan": "#6B6ECF", "Elementwise": "#DBDB8D",
    "SiLU": "#B5CF6B", "Cast": "#E7969C", "MemCopy": "#C7C7C7", "Memset": "#525252", OTHER_TYPE: "#9E9E9E",
}
"""Hand-picked so that the types seen together most (GEMM, attention, norms, MoE, sort) differ in hue."""
_SPARE = px.colors.qualitative.Dark24
TYPE_COLORS: dict[str, str] = {
    kernel_type: _TYPE_PALETTE.get(kernel_type, _SPARE[i % len(_SPARE)]) for i, kernel_type in enumerate(KERNEL_TYPES)
}
"""One colour per kernel type, the same on every page."""
SIDE_COLORS = {1: "#C8102E", 2: "#5A9E00"}
"""Trace 1 and trace 2 keep their own colours (by side, not by vendor)."""
MIN_RATIO_SPAN = 1
"""A ratio axis reaches at least 2^1 = 2× and ½× around 1×, so a 4 % difference is drawn as small."""
TOOLBAR_MARGIN = 40
"""Top margin (px) that keeps Plotly's toolbar above the plot area instead of over the bars."""


def type_color(kernel_type: object) -> str:
    return TYPE_COLORS.get(str(kernel_type), TYPE_COLORS.get(OTHER_TYPE, "#999"))


def clear_toolbar(fig: go.Figure) -> go.Figure:
    """Room above the plot for the toolbar."""
    top = fig.layout.margin.t
    fig.update_layout(margin=dict(t=max(top or 0, TOOLBAR_MARGIN)))
    return fig


def ratio_axis(log2_ratios: np.ndarray, one_sided: bool) -> tuple[int, int | None]:
    """The axis half-span R (ticks 2^-R..2^R, at least MIN_RATIO_SPAN) and where one-sided types sit (R+1 or None)."""
    finite = np.abs(log2_ratios[np.isfinite(log2_ratios)])
    span = max(MIN_RATIO_SPAN, math.ceil(float(finite.max()) - 1e-9) if len(finite) else 0)
    return span, (span + 1 if one_sided else None)


def ratio_chart(stats: pd.DataFrame, column: str, title: str) -> go.Figure:
    """Trace 1 / trace 2 per type on a symmetric log axis; one-sided types sit on an extra, labelled tick."""
    ratios = stats[column].astype(float).to_numpy()
    only = stats[ONLY_IN].astype(int).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        log2 = np.where((only == 0) & (ratios > 0), np.log2(ratios), np.nan)
    span, edge = ratio_axis(log2, bool((only != 0).any()))
    shown = np.where(only == 1, edge or 0, np.where(only == 2, -(edge or 0), log2))
    notes = np.where(only == 1, "only in trace 1", np.where(only == 2, "only in trace 2", ""))
    types = [text.plotly(t) for t in stats.index]
    fig = go.Figure()
    fig.add_hline(y=0, line_dash="dot", line_color="#888")
    fig.add_scatter(
        x=types,
        y=shown,
        mode="markers",
        marker=dict(
            size=14,
            color=[type_color(t) for t in stats.index],
            symbol=np.where(only == 1, "triangle-up", np.where(only == 2, "triangle-down", "circle")),
            line=dict(width=1, color="#333"),
        ),
        customdata=np.stack([[text.ratio(r) for r in ratios], notes], axis=1),
        hovertemplate="%{x}<br>trace 1 / trace 2: %{customdata[0]} %{customdata[1]}<extra></extra>",
        showlegend=False,
        cliponaxis=False,
    )
    ticks = list(range(-span, span + 1))
    labels = [text.ratio_tick(2.0**k) for k in ticks]
    if edge:
        ticks, labels = [-edge, *ticks, edge], ["only trace 2", *labels, "only trace 1"]
    top = edge or span
    fig.update_yaxes(title=title, tickvals=ticks, ticktext=labels, range=[-top - 0.4, top + 0.4], zeroline=False)
    fig.update_layout(margin=dict(t=TOOLBAR_MARGIN, r=20), height=340)
    return fig


def side_by_side(labels: tuple[str, str], stats: pd.DataFrame, what: str, scale: float, unit: str) -> go.Figure:
    """Per type, trace 1's and trace 2's value as grouped bars."""
    fig = go.Figure()
    types = [text.plotly(t) for t in stats.index]
    for side in (1, 2):
        fig.add_bar(
            x=types,
            y=stats[side_column(what, side)] * scale,
            name=f"Trace {side}: {text.plotly(labels[side - 1])}",
            marker_color=SIDE_COLORS[side],
            hovertemplate=f"%{{x}}<br>trace {side}: %{{y:,.3f}} {unit}<extra></extra>",
        )
    fig.update_layout(barmode="group", yaxis_title=unit, legend=dict(orientation="h", y=1.02, yanchor="bottom"),
                      margin=dict(t=TOOLBAR_MARGIN + 30))
    return fig


PHASE_COLORS = {
    "prefill": "#1F77B4", "decode": "#FF7F0E", "mixed": "#9467BD",
    "forward": "#2CA02C", "backward": "#D62728", "optimizer": "#8C564B", "all": "#9E9E9E",
}
"""Hand-picked, one per fusion.phases.PHASES value; 'all' (no phase signal) is grey."""


def step_timeline(labels: tuple[str, str], spans: tuple[pd.DataFrame, pd.DataFrame]) -> go.Figure:
    """Each trace's recorded steps (phase_compare.step_spans) as one row of bars coloured by phase.

    Time is relative to each trace's first step, so the two rows line up although their clocks differ."""
    fig = go.Figure()
    rows = [f"Trace {side}: {text.plotly(labels[side - 1])}" for side in (1, 2)]
    shown: set[str] = set()
    for side, table in zip((1, 2), spans):
        if table.empty:
            continue
        start = table["start_us"] - table["start_us"].min()
        for phase, part in table.assign(rel=start / 1000).groupby("phase", sort=False):
            fig.add_bar(
                y=[rows[side - 1]] * len(part), x=(part["end_us"] - part["start_us"]) / 1000, base=part["rel"],
                orientation="h", name=text.plotly(phase), legendgroup=str(phase), showlegend=phase not in shown,
                marker_color=PHASE_COLORS.get(str(phase), "#000000"), marker_line_width=1, marker_line_color="white",
                customdata=np.column_stack([part["step"], part["kernels"], part["time_us"] / 1000]),
                hovertemplate=f"{text.plotly(phase)} step %{{customdata[0]}}<br>%{{customdata[1]:,}} kernels,"
                              " %{customdata[2]:,.3f} ms of kernel time<extra></extra>",
            )
            shown.add(str(phase))
    fig.update_layout(barmode="overlay", height=90 + 45 * 2, xaxis_title="ms from the trace's first step",
                      yaxis=dict(categoryorder="array", categoryarray=rows[::-1]),
                      legend=dict(orientation="h", y=1.02, yanchor="bottom", title_text="phase"),
                      margin=dict(t=TOOLBAR_MARGIN + 30))
    return fig
