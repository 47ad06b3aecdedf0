"""Plotly figures and SVG pictures shared by the pages, and the colours of types and sides. No streamlit here.

Every piece of trace text a figure shows (labels, kernel names) goes through `text.plotly`, and every piece a
picture shows through `text.svg`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from fusion.classify.names import KERNEL_TYPES
from fusion.efficiency.rates import shapes_text
from fusion.result import ONLY_IN, side_column
from ui import text

OTHER_TYPE = "Other"
_TYPE_PALETTE = {
    "GEMM": "#1F77B4",
    "MoE_GEMM": "#17BECF",
    "Attention": "#FF7F0E",
    "KV_Cache": "#FFBB78",
    "Communication": "#8C564B",
    "Convolution": "#C49C94",
    "RMSNorm": "#9467BD",
    "LayerNorm": "#C5B0D5",
    "BatchNorm": "#7B4173",
    "GroupNorm": "#A55194",
    "L2Norm": "#DE9ED6",
    "SwiGLU": "#2CA02C",
    "GELU": "#98DF8A",
    "ReLU": "#637939",
    "RoPE": "#BCBD22",
    "MoE_Routing": "#E377C2",
    "Softmax": "#D62728",
    "Embedding": "#AD494A",
    "Quantize": "#E7BA52",
    "Reduce": "#843C39",
    "Sort": "#393B79",
    "Scan": "#6B6ECF",
    "Elementwise": "#DBDB8D",
    "SiLU": "#B5CF6B",
    "Cast": "#E7969C",
    "MemCopy": "#C7C7C7",
    "Memset": "#525252",
    OTHER_TYPE: "#9E9E9E",
}
"""Hand-picked so that the types seen together most (GEMM, attention, norms, MoE, sort) differ in hue."""
_SPARE = px.colors.qualitative.Dark24
TYPE_COLORS: dict[str, str] = {
    kernel_type: _TYPE_PALETTE.get(kernel_type, _SPARE[i % len(_SPARE)]) for i, kernel_type in enumerate(KERNEL_TYPES)
}
"""One colour per kernel type, the same on every page."""
SIDE_COLORS = {1: "#C8102E", 2: "#5A9E00"}
"""Trace 1 and trace 2 keep their own colours (by side, not by vendor)."""
OP_COLORS = {"match": "#E0E0E0", "substitute": "#F5A623", "only1": SIDE_COLORS[1], "only2": SIDE_COLORS[2]}
"""The alignment lane: one colour per alignment op (fusion.match.align.OP_NAMES)."""
MIN_RATIO_SPAN = 1
"""A ratio axis reaches at least 2^1 = 2× and ½× around 1×, so a 4 % difference is drawn as small."""
TOOLBAR_MARGIN = 40
"""Top margin (px) that keeps Plotly's toolbar above the plot area instead of over the bars."""


def type_color(kernel_type: object) -> str:
    return TYPE_COLORS.get(str(kernel_type), TYPE_COLORS.get(OTHER_TYPE, "#999"))


def type_legend(fig: go.Figure, types: list[str]) -> go.Figure:
    """A legend of the kernel types a chart colours its bars by (per-bar colours give Plotly no legend of their
    own): one entry per type, in type_color's colour, drawing nothing."""
    for kernel_type in types:
        fig.add_scatter(
            x=[None],
            y=[None],
            mode="markers",
            marker={"color": type_color(kernel_type), "symbol": "square", "size": 10},
            name=text.plotly(kernel_type),
            showlegend=True,
            hoverinfo="skip",
        )
    fig.update_layout(legend={"title": {"text": "kernel type"}, "orientation": "h", "y": -0.35})
    return fig


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


@dataclass(frozen=True)
class RatioPoints:
    """Where a ratio chart puts each type: log2 of trace 1 / trace 2 on a symmetric axis (ticks -span..span),
    one-sided types on an extra tick at +edge (only in trace 1) or -edge (only in trace 2)."""

    types: list[str]
    ratios: np.ndarray
    only: np.ndarray
    """Per type: 1 or 2 when only that trace has it, else 0."""
    shown: np.ndarray
    span: int
    edge: int | None

    @classmethod
    def of(cls, stats: pd.DataFrame, column: str) -> RatioPoints:
        ratios = stats[column].astype(float).to_numpy()
        only = stats[ONLY_IN].astype(int).to_numpy()
        with np.errstate(divide="ignore", invalid="ignore"):
            log2 = np.where((only == 0) & (ratios > 0), np.log2(ratios), np.nan)
        span, edge = ratio_axis(log2, bool((only != 0).any()))
        shown = np.where(only == 1, edge or 0, np.where(only == 2, -(edge or 0), log2))
        return cls([str(t) for t in stats.index], ratios, only, shown, span, edge)

    def ticks(self) -> tuple[list[int], list[str]]:
        ticks = list(range(-self.span, self.span + 1))
        labels = [text.ratio_tick(2.0**k) for k in ticks]
        if self.edge:
            return [-self.edge, *ticks, self.edge], ["only trace 2", *labels, "only trace 1"]
        return ticks, labels

    @property
    def limit(self) -> float:
        """The axis runs from -limit to +limit."""
        return (self.edge or self.span) + 0.4

    def notes(self) -> list[str]:
        return ["only in trace 1" if o == 1 else "only in trace 2" if o == 2 else "" for o in self.only.tolist()]


def ratio_chart(stats: pd.DataFrame, column: str, title: str) -> go.Figure:
    """Trace 1 / trace 2 per type on a symmetric log axis; one-sided types sit on an extra, labelled tick."""
    points = RatioPoints.of(stats, column)
    fig = go.Figure()
    fig.add_hline(y=0, line_dash="dot", line_color="#888")
    fig.add_scatter(
        x=[text.plotly(t) for t in points.types],
        y=points.shown,
        mode="markers",
        marker=dict(
            size=14,
            color=[type_color(t) for t in points.types],
            symbol=np.where(points.only == 1, "triangle-up", np.where(points.only == 2, "triangle-down", "circle")),
            line=dict(width=1, color="#333"),
        ),
        customdata=np.stack([[text.ratio(r) for r in points.ratios], points.notes()], axis=1),
        hovertemplate="%{x}<br>trace 1 / trace 2: %{customdata[0]} %{customdata[1]}<extra></extra>",
        showlegend=False,
        cliponaxis=False,
    )
    ticks, labels = points.ticks()
    fig.update_yaxes(title=title, tickvals=ticks, ticktext=labels, range=[-points.limit, points.limit], zeroline=False)
    fig.update_layout(margin=dict(t=TOOLBAR_MARGIN, r=20), height=340)
    return fig


def _svg(width: int, height: int, body: list[str]) -> str:
    """An SVG picture of `width` x `height` px (it scales: the pages show it with widgets.picture, as an image,
    so it can hold no link or script)."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'font-family="sans-serif" font-size="12">{"".join(body)}</svg>'
    )


RATIO_ROW, RATIO_NAMES, RATIO_PLOT, RATIO_VALUES, RATIO_TOP = 22, 110, 230, 100, 58
"""Ratio picture layout (SVG units): row height, type-name column, plot width, value column, axis band at the top."""


def ratio_svg(stats: pd.DataFrame, column: str, title: str) -> str:
    """The ratio chart as an SVG picture, one row per type (largest difference first) with its value written out:
    what the home page shows at a glance without loading a chart library (the Overview page has the chart)."""
    points = RatioPoints.of(stats, column)
    order = np.argsort(-np.nan_to_num(np.abs(points.shown), nan=-1.0), kind="stable")
    width = RATIO_NAMES + RATIO_PLOT + RATIO_VALUES
    height = RATIO_TOP + RATIO_ROW * len(order) + 8

    def x(value: float) -> float:
        return round(RATIO_NAMES + (value + points.limit) / (2 * points.limit) * RATIO_PLOT, 1)

    parts = [
        f'<text x="{x(0)}" y="12" text-anchor="middle" fill="#555">{text.svg(title)}</text>',
        f'<line x1="{x(0)}" y1="{RATIO_TOP - 6}" x2="{x(0)}" y2="{height - 4}" stroke="#888" stroke-dasharray="3,3"/>',
    ]
    for tick, label in zip(*points.ticks()):
        above = points.edge is not None and abs(tick) == points.edge  # the one-sided ticks' long labels
        parts.append(
            f'<text x="{x(tick)}" y="{RATIO_TOP - (24 if above else 10)}" text-anchor="middle" fill="#555" '
            f'font-size="10">{text.svg(label)}</text>'
        )
    notes = points.notes()
    for row, i in enumerate(order.tolist()):
        y = RATIO_TOP + RATIO_ROW * row + RATIO_ROW / 2
        parts.append(f'<text x="{RATIO_NAMES - 8}" y="{y + 4}" text-anchor="end">{text.svg(points.types[i])}</text>')
        parts.append(f'<line x1="{RATIO_NAMES}" y1="{y}" x2="{RATIO_NAMES + RATIO_PLOT}" y2="{y}" stroke="#eee"/>')
        value = notes[i] or text.ratio(points.ratios[i])
        if np.isfinite(points.shown[i]):
            parts.append(_marker(x(float(points.shown[i])), y, int(points.only[i]), type_color(points.types[i])))
        parts.append(f'<text x="{RATIO_NAMES + RATIO_PLOT + 8}" y="{y + 4}">{text.svg(value)}</text>')
    return _svg(width, height, parts)


def _marker(x: float, y: float, only: int, color: str) -> str:
    """A circle, or a triangle pointing to the trace that alone has the type (up: trace 1, down: trace 2)."""
    if only:
        tip = -7 if only == 1 else 7
        return (
            f'<polygon points="{x},{y + tip} {x - 7},{y - tip} {x + 7},{y - tip}" fill="{color}" '
            'stroke="#333" stroke-width="1"/>'
        )
    return f'<circle cx="{x}" cy="{y}" r="6" fill="{color}" stroke="#333" stroke-width="1"/>'


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
    fig.update_layout(
        barmode="group",
        yaxis_title=unit,
        legend=dict(orientation="h", y=1.02, yanchor="bottom"),
        margin=dict(t=TOOLBAR_MARGIN + 30),
    )
    return fig


STRIP_WIDTH, STRIP_LABELS, STRIP_LANE, STRIP_AXIS, STRIP_LEGEND = 1200, 80, 26, 24, 20
"""Alignment strip layout (SVG units): width, lane-label column, lane height, axis band below the lanes, height of
a line of the type legend."""
LEGEND_CHAR = 7
"""About the width of a 12-unit sans-serif character, to lay out legend entries."""


def alignment_svg(rows: pd.DataFrame) -> str:
    """Aligned kernels as three lanes of cells, one cell per aligned position: trace 1's kernel types, the
    alignment op (OP_COLORS), trace 2's kernel types; blank where a side has no kernel. The axis numbers the
    positions as the aligned-kernels table does; below it, a legend of the kernel types the lanes show (the page
    gives the alignment op's)."""
    cell = (STRIP_WIDTH - STRIP_LABELS) / max(len(rows), 1)
    body = [
        f'<text x="{STRIP_LABELS - 6}" y="{lane * STRIP_LANE + 17}" text-anchor="end">{label}</text>'
        for lane, label in enumerate(("trace 1", "alignment", "trace 2"))
    ]
    colours = zip(
        [type_color(t) if isinstance(t, str) else None for t in rows["type1"]],
        [OP_COLORS[op] for op in rows["op"]],
        [type_color(t) if isinstance(t, str) else None for t in rows["type2"]],
    )
    for i, lanes in enumerate(colours):
        x = round(STRIP_LABELS + i * cell, 2)
        body += [
            f'<rect x="{x}" y="{lane * STRIP_LANE + 2}" width="{round(cell, 2)}" height="{STRIP_LANE - 4}" fill="{colour}"'
            ' shape-rendering="crispEdges"/>'
            for lane, colour in enumerate(lanes)
            if colour
        ]
    step = _tick_step(len(rows))
    for i, position in enumerate(rows.index.tolist()):
        if position % step == 0:
            x = round(STRIP_LABELS + (i + 0.5) * cell, 1)
            body.append(
                f'<text x="{x}" y="{3 * STRIP_LANE + 16}" text-anchor="middle" fill="#555" font-size="11">{position}</text>'
            )
    present = {t for side in (1, 2) for t in rows[f"type{side}"] if isinstance(t, str)}
    legend, lines = type_legend_svg(legend_order(present), 3 * STRIP_LANE + STRIP_AXIS)
    return _svg(STRIP_WIDTH, 3 * STRIP_LANE + STRIP_AXIS + lines * STRIP_LEGEND, body + legend)


def legend_order(types: set[str]) -> list[str]:
    """Kernel types in the order of TYPE_COLORS, then any other alphabetically."""
    return [t for t in TYPE_COLORS if t in types] + sorted(types - set(TYPE_COLORS))


def type_legend_svg(types: list[str], top: float) -> tuple[list[str], int]:
    """A legend of kernel types from `top` down: 'kernel type' in the label column, then a swatch and name per type,
    wrapped to the strip's width; its SVG parts and number of lines."""
    if not types:
        return [], 0
    parts = [f'<text x="{STRIP_LABELS - 6}" y="{top + 14}" text-anchor="end" fill="#555">kernel type</text>']
    x, line = STRIP_LABELS, 0
    for kernel_type in types:
        width = 18 + LEGEND_CHAR * len(kernel_type) + 14
        if x + width > STRIP_WIDTH and x > STRIP_LABELS:
            x, line = STRIP_LABELS, line + 1
        y = top + line * STRIP_LEGEND
        parts.append(
            f'<rect x="{x}" y="{y + 4}" width="12" height="12" fill="{type_color(kernel_type)}" stroke="#999"/>'
        )
        parts.append(f'<text x="{x + 18}" y="{y + 14}">{text.svg(kernel_type)}</text>')
        x += width
    return parts, line + 1


def _tick_step(positions: int) -> int:
    """A round step between axis labels that gives at most about ten of them."""
    return next(step for step in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 10**9) if positions / step <= 10)


BAR_ROW, BAR_NAMES, BAR_PLOT, BAR_VALUES = 24, 120, 420, 260
"""Bar picture layout (SVG units): row height, label column, longest bar, value column."""


def bars_svg(labels: list[str], values: list[float], colours: list[str], notes: list[str], title: str) -> str:
    """Horizontal bars, one row per label in the order given, each with its value note written out; bars scale
    to the largest value."""
    largest = max([v for v in values if v > 0], default=1.0)
    height = 24 + BAR_ROW * len(labels)
    body = [f'<text x="{BAR_NAMES}" y="14" fill="#555">{text.svg(title)}</text>']
    for row, (label, value, colour, note) in enumerate(zip(labels, values, colours, notes)):
        y = 24 + BAR_ROW * row
        length = round(max(value, 0.0) / largest * BAR_PLOT, 1)
        body.append(f'<text x="{BAR_NAMES - 8}" y="{y + 16}" text-anchor="end">{text.svg(label)}</text>')
        body.append(f'<rect x="{BAR_NAMES}" y="{y + 4}" width="{length}" height="{BAR_ROW - 8}" fill="{colour}"/>')
        body.append(f'<text x="{BAR_NAMES + length + 6}" y="{y + 16}">{text.svg(note)}</text>')
    return _svg(BAR_NAMES + BAR_PLOT + BAR_VALUES, height, body)


PHASE_COLORS = {
    "prefill": "#1F77B4",
    "decode": "#FF7F0E",
    "mixed": "#9467BD",
    "forward": "#2CA02C",
    "backward": "#D62728",
    "optimizer": "#8C564B",
    "all": "#9E9E9E",
}
"""Hand-picked, one per fusion.model.phases.PHASES value; 'all' (no phase signal) is grey."""


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
                y=[rows[side - 1]] * len(part),
                x=(part["end_us"] - part["start_us"]) / 1000,
                base=part["rel"],
                orientation="h",
                name=text.plotly(phase),
                legendgroup=str(phase),
                showlegend=phase not in shown,
                marker_color=PHASE_COLORS.get(str(phase), "#000000"),
                marker_line_width=1,
                marker_line_color="white",
                customdata=np.column_stack([part["step"], part["kernels"], part["time_us"] / 1000]),
                hovertemplate=f"{text.plotly(phase)} step %{{customdata[0]}}<br>%{{customdata[1]:,}} kernels,"
                " %{customdata[2]:,.3f} ms of kernel time<extra></extra>",
            )
            shown.add(str(phase))
    fig.update_layout(
        barmode="overlay",
        height=90 + 45 * 2,
        xaxis_title="ms from the trace's first step",
        yaxis=dict(categoryorder="array", categoryarray=rows[::-1]),
        legend=dict(orientation="h", y=1.02, yanchor="bottom", title_text="phase"),
        margin=dict(t=TOOLBAR_MARGIN + 30),
    )
    return fig


ROOFLINE_POINTS = (8.0, 40.0)
"""Smallest and largest marker of the roofline (px): a signature's marker area follows its kernel time."""


def roofline(labels: tuple[str, str], signatures: tuple[pd.DataFrame, pd.DataFrame], bandwidths: tuple) -> go.Figure:
    """Both traces' op signatures on one log-log roofline (fusion.efficiency.rates' columns): arithmetic intensity
    against achieved TFLOP/s, one point per signature sized by its time and coloured by side; each side's
    ceilings, bandwidth x intensity up to the matrix and the vector peak. customdata[0] is the canonical op."""
    fig = go.Figure()
    rated = [t[(t["tflops"] > 0) & (t["intensity"] > 0)] if len(t) else t for t in signatures]
    longest = max([float(t["time_us"].max()) for t in rated if len(t)] or [1.0])
    xs: list[float] = []
    for side, table in zip((1, 2), rated):
        if not len(table):
            continue
        xs += table["intensity"].tolist()
        size = ROOFLINE_POINTS[0] + (ROOFLINE_POINTS[1] - ROOFLINE_POINTS[0]) * np.sqrt(table["time_us"] / longest)
        custom = np.column_stack(
            [
                table["op"].astype(str),
                [text.plotly(v) for v in table["counted_op"]],
                [text.plotly(shapes_text(v or "")) for v in table["dims"]],
                table["dtype"].astype(str),
                table["calls"].astype(int),
                table["time_us"] / 1e3,
                [text.plotly(", ".join(names)[:300]) for names in table["kernel_names"]],
                table["tb_s"],
                table["bound"].astype(str),
            ]
        )
        fig.add_scatter(
            x=table["intensity"],
            y=table["tflops"],
            mode="markers",
            name=f"Trace {side}: {text.plotly(labels[side - 1])}",
            marker=dict(size=size, color=SIDE_COLORS[side], opacity=0.7, line=dict(width=1, color="white")),
            customdata=custom,
            hovertemplate=(
                "<b>%{customdata[1]}</b> %{customdata[2]} %{customdata[3]}<br>%{customdata[4]} calls, "
                "%{customdata[5]:.3f} ms<br>%{y:.3g} TFLOP/s, %{customdata[7]:.3g} TB/s at %{x:.3g} FLOP/byte "
                "(%{customdata[8]}-bound)<br>kernels: %{customdata[6]}<extra>trace " + str(side) + "</extra>"
            ),
        )
    low, high = (min(xs) / 4, max(xs) * 4) if xs else (0.1, 1000.0)
    grid = np.geomspace(low, high, 200)
    for side, (table, bandwidth) in enumerate(zip(signatures, bandwidths), start=1):
        if not bandwidth or not len(table):
            continue
        for matrix, dash, what in ((True, "solid", "matrix"), (False, "dot", "vector")):
            peaks = table.loc[table["matrix"].astype(bool) == matrix, "peak_tflops"].dropna()
            if not len(peaks):
                continue
            peak = float(peaks.max())
            fig.add_scatter(
                x=grid,
                y=np.minimum(peak, bandwidth * grid),
                mode="lines",
                line=dict(color=SIDE_COLORS[side], dash=dash, width=1.5),
                name=f"Trace {side} {what} ceiling: {peak:,.4g} TFLOP/s, {bandwidth:g} TB/s",
                hoverinfo="skip",
            )
    fig.update_layout(
        xaxis=dict(type="log", title="arithmetic intensity (FLOP / byte)"),
        yaxis=dict(type="log", title="achieved TFLOP/s"),
        legend=dict(orientation="h", y=1.02, yanchor="bottom"),
        margin=dict(t=TOOLBAR_MARGIN + 60),
        clickmode="event+select",
        height=560,
    )
    return fig
