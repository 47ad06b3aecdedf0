"""The Timeline page's plain parts: what a view shows, the figure of an aligned timeline, and where a click on a
kernel leads. No streamlit here.

The figure (plotly) has one lane per trace on the shared aligned axis (fusion.report.timeline), a bar per kernel
coloured by operation type (one legend entry per type), grey lines between aligned kernels (orange where their
types differ), one-sided kernels hatched, the fused kernels of findings outlined, inserted waits as pale bars and,
above, a lane of the findings' cited spans.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from fusion.comparison.result import Comparison
from fusion.match.op_calls import align_calls, op_calls
from fusion.report.timeline import ONE_SIDED, STATUSES, Lane, Timeline
from ui import charts, text
from ui.state import TIMELINE_VIEWS, View

LANE_Y = {1: 1.0, 2: 0.0}
FINDINGS_Y = 2.0
BAR_HALF = 0.3
NAME_CHARS = 120
"""Kernel names are cut to this many characters in hover text."""
ONE_SIDED_PATTERN = "x"
FUSED_OUTLINE = "#111111"
WAIT_COLOR = "rgba(160, 160, 160, 0.35)"
LINK_COLORS = {True: "rgba(120, 120, 120, 0.55)", False: charts.OP_COLORS["substitute"]}


def shown(view: View, comparison: Comparison) -> str:
    """Which of TIMELINE_VIEWS the view asks for: its own choice, else a finding or op call the link names, else
    a pair."""
    if view.tl in TIMELINE_VIEWS:
        return view.tl
    if view.finding is not None and comparison.mappings:
        return "finding"
    return "call" if view.op is not None and not comparison.op_table.empty else "pair"


def aligned_calls(comparison: Comparison) -> dict[str, int]:
    """Per canonical op, its aligned call pairs (fusion.match.op_calls): what an op call is chosen from."""
    calls = (op_calls(comparison.trace1, 1), op_calls(comparison.trace2, 2))
    if not len(calls[0]) or not len(calls[1]):
        return {}
    return dict(Counter(calls[0].ops[align_calls(*calls)[:, 0]].tolist()))


@dataclass(frozen=True)
class Clicked:
    """A kernel clicked on the timeline: its side, kernel row and the pair whose alignment places it (-1: none)."""

    side: int
    row: int
    pair: int


def clicked(point: dict) -> Clicked | None:
    """The kernel of a selected point (its customdata), or None for a line, a wait or a finding."""
    data = point.get("customdata")
    if not isinstance(data, (list, tuple)) or len(data) < 7 or data[0] not in (1, 2):
        return None
    return Clicked(int(data[0]), int(data[1]), int(data[2]))


def drill_down(view: View, kernel: Clicked, comparison: Comparison) -> tuple[str, View]:
    """Where a clicked kernel opens: its pair on the Groups page with the kernel as the marked window, or, outside
    every pair, its name on the Kernels page."""
    if kernel.pair >= 0:
        window = (kernel.row, kernel.row + 1)
        return "groups", view.with_type(None).with_pair(
            kernel.pair, window if kernel.side == 1 else None, window if kernel.side == 2 else None
        )
    name = str(comparison.trace(kernel.side).kernels["name"].iat[kernel.row])
    return "kernels", view.with_(tab=str(kernel.side), q=name[:200])


def figure(timeline: Timeline, comparison: Comparison) -> go.Figure:
    """The aligned timeline as a zoomable plotly figure (see module doc)."""
    fig = go.Figure()
    frames = {lane.side: _kernels(lane, comparison) for lane in timeline.lanes}
    _add_links(fig, timeline, frames)
    _add_waits(fig, timeline)
    both = pd.concat(frames.values(), ignore_index=True)
    present = set(both["type"])
    for kernel_type in charts.legend_order(present):
        _add_kernels(fig, both[both["type"] == kernel_type], text.plotly(kernel_type), charts.type_color(kernel_type))
    _add_kernels(
        fig, both[both["one_sided"]], "one-sided kernel (hatched)", "rgba(0, 0, 0, 0)", pattern=ONE_SIDED_PATTERN
    )
    _add_kernels(
        fig, both[both["fused"]], "fused kernel of a finding (outlined)", "rgba(0, 0, 0, 0)", outline=FUSED_OUTLINE
    )
    _add_findings(fig, timeline)
    labels = {s: f"trace {s}: {text.plotly(comparison.trace(s).label)}" for s in (1, 2)}
    ticks = [LANE_Y[2], LANE_Y[1]] + ([FINDINGS_Y] if timeline.findings else [])
    fig.update_layout(
        barmode="overlay",
        height=330 if timeline.findings else 270,
        dragmode="zoom",
        xaxis=dict(title="µs on the aligned axis (matched units start together)", rangemode="tozero"),
        yaxis=dict(
            tickvals=ticks,
            ticktext=[labels[2], labels[1]] + (["findings"] if timeline.findings else []),
            fixedrange=True,
            range=[-0.6, (FINDINGS_Y if timeline.findings else LANE_Y[1]) + 0.6],
        ),
        legend=dict(orientation="h", y=1.02, yanchor="bottom", title_text="kernel type"),
        margin=dict(t=charts.TOOLBAR_MARGIN + 60, l=10, r=10),
        clickmode="event+select",
    )
    return fig


def _kernels(lane: Lane, comparison: Comparison) -> pd.DataFrame:
    kernels = comparison.trace(lane.side).kernels.iloc[lane.rows]
    op = kernels["op"].astype(str).to_numpy() if "op" in kernels.columns else np.full(len(kernels), "")
    return pd.DataFrame(
        {
            "side": lane.side,
            "row": lane.rows,
            "pair": lane.pair,
            "name": [text.plotly(n[:NAME_CHARS]) for n in kernels["name"].astype(str)],
            "status": [STATUSES[s] for s in lane.status.tolist()],
            "op": [text.plotly(o) if o else "no op recorded" for o in op],
            "kind": kernels["type"].astype(str).to_numpy(),
            "type": kernels["type"].astype(str).to_numpy(),
            "start": lane.start,
            "dur": kernels["dur"].to_numpy(np.float64),
            "y": LANE_Y[lane.side],
            "one_sided": lane.status == ONE_SIDED,
            "fused": lane.fused,
        }
    )


def _add_links(fig: go.Figure, timeline: Timeline, frames: dict[int, pd.DataFrame]) -> None:
    """One line per aligned kernel pair, from the middle of one bar to the middle of the other."""
    if not len(timeline.links):
        return
    ends = []
    for side in (1, 2):
        lane, frame = timeline.lane(side), frames[side]
        at = lane.positions(timeline.links[:, side - 1])
        ends.append(frame["start"].to_numpy()[at] + frame["dur"].to_numpy()[at] / 2)
    for same in (True, False):
        chosen = timeline.same_type == same
        if not chosen.any():
            continue
        count = int(chosen.sum())
        x = np.column_stack([ends[0][chosen], ends[1][chosen], np.full(count, np.nan)]).ravel()
        y = np.tile([LANE_Y[1] - BAR_HALF, LANE_Y[2] + BAR_HALF, np.nan], count)
        fig.add_scatter(
            x=x,
            y=y,
            mode="lines",
            line=dict(color=LINK_COLORS[same], width=1),
            name="aligned, same type" if same else "aligned, another type",
            legendgroup="links",
            hoverinfo="skip",
        )


def _add_waits(fig: go.Figure, timeline: Timeline) -> None:
    if not timeline.gaps:
        return
    fig.add_bar(
        base=[g.start for g in timeline.gaps],
        x=[g.stop - g.start for g in timeline.gaps],
        y=[LANE_Y[g.side] for g in timeline.gaps],
        width=2 * BAR_HALF,
        orientation="h",
        name="inserted wait",
        marker=dict(color=WAIT_COLOR, line=dict(width=0)),
        customdata=[[text.plotly(g.unit)] for g in timeline.gaps],
        hovertemplate="waits %{x:,.3f} µs, so that %{customdata[0]} starts on both traces at once<extra></extra>",
    )


def _add_kernels(
    fig: go.Figure, part: pd.DataFrame, name: str, color: str, pattern: str = "", outline: str = "white"
) -> None:
    """One bar per kernel of `part`; the marks for one-sided and fused kernels are clear bars drawn over the
    coloured ones, with the same hover and click data."""
    if part.empty:
        return
    fig.add_bar(
        base=part["start"],
        x=part["dur"],
        y=part["y"],
        width=2 * BAR_HALF,
        orientation="h",
        name=name,
        marker=dict(
            color=color,
            pattern=dict(shape=pattern, fgcolor="#222222"),
            line=dict(color=outline, width=2.5 if outline != "white" else 0.5),
        ),
        customdata=part[["side", "row", "pair", "name", "status", "op", "kind"]].to_numpy(object),
        hovertemplate="%{customdata[3]}<br>%{customdata[6]} · %{x:,.3f} µs · %{customdata[5]}"
        "<br>%{customdata[4]} · trace %{customdata[0]} kernel %{customdata[1]}<extra></extra>",
    )


def _add_findings(fig: go.Figure, timeline: Timeline) -> None:
    spans = timeline.findings
    if not spans:
        return
    fig.add_bar(
        base=[s.start for s in spans],
        x=[s.stop - s.start for s in spans],
        y=[FINDINGS_Y] * len(spans),
        width=2 * BAR_HALF,
        orientation="h",
        name="finding (cited kernels)",
        marker=dict(color="rgba(200, 16, 46, 0.25)", line=dict(color=charts.SIDE_COLORS[1], width=1)),
        customdata=[[text.plotly(s.title), text.plotly(s.text[:300])] for s in spans],
        hovertemplate="%{customdata[0]}<br>%{customdata[1]}<extra></extra>",
    )
