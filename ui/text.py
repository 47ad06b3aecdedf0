"""Untrusted text (kernel and GPU names, file names, labels from links) made literal for each place it is shown,
and numbers as text. No streamlit here.

Each display sink has its own syntax, so each has one function:
- `md`: Streamlit markdown (st.markdown, captions, messages): markdown syntax, directives and autolinks;
  `code` shows it as a code span there instead (kernel names);
- `label`: widget, tab and metric labels, which Streamlit renders as a markdown subset;
- `plotly`: Plotly's HTML subset in hover text, legend entries, axis categories and annotations;
- `svg`: text and attribute values of the SVG pictures the pages draw themselves.
Dataframe cells and st.code show text as it is and need nothing.
"""

from __future__ import annotations

import html
import math
import re

_MARKDOWN_SYNTAX = re.compile(r"([\\`*_{}\[\]()<>#+!|~$:.@&=-])")
"""Everything markdown, Streamlit's :directives: and GFM autolinks (https://, www., a@b) are made of."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_AUTOLINK = re.compile(r"(?i)(?<=www)(?=\.)|(?<=:)(?=//)|(?=@)")
"""Where GFM would start an autolink (www., scheme://, a@b); escapes do not stop it, an invisible joiner does."""
WORD_JOINER = "\u2060"
SHORT_NAME_CHARS = 80
"""A kernel name longer than this is shown shortened (short_name); tables fit a 1280 px screen with two of them."""
_QUALIFIER = re.compile(r"(?:\(anonymous namespace\)|[A-Za-z_]\w*)::")
"""A namespace or class qualifier (at::native::, (anonymous namespace)::): the same in most names of a family."""
ELLIPSIS = "…"
_CLOSURE = re.compile(r"(?:\([^()]*\))?(?:::\{lambda\([^()]*\)#\d+\}|::operator\(\)\(\) const)+")
"""A lambda's path inside the function that defines it (silu_kernel(...)::{lambda()#1}::operator()() const::...):
the defining function names it."""


def md(text: object) -> str:
    """Untrusted text as literal markdown: every syntax character backslash-escaped, on one line."""
    unlinked = _AUTOLINK.sub(WORD_JOINER, _CONTROL.sub(" ", str(text)))
    return _MARKDOWN_SYNTAX.sub(r"\\\1", unlinked)


def code(text: object) -> str:
    """Untrusted text as a markdown code span: a fence longer than any backtick run inside, so nothing is interpreted."""
    plain = _CONTROL.sub(" ", str(text))
    fence = "`" * (max((len(run) for run in re.findall("`+", plain)), default=0) + 1)
    return f"{fence} {plain} {fence}"


def short_name(name: str, limit: int = SHORT_NAME_CHARS) -> str:
    """A long kernel name as a table shows it: without the leading 'void ', namespace qualifiers, lambda paths and
    the trailing parameter list, then cut in the middle (three quarters kept from the start: the family and its
    first template arguments or tile, a quarter from the end: the last ones), so names of one family stay told
    apart."""
    if len(name) <= limit:
        return name
    core = _QUALIFIER.sub("", _CLOSURE.sub("", _without_parameters(name.removeprefix("void "))))
    if len(core) <= limit:
        return core
    head = (limit - 1) * 3 // 4
    return core[:head] + ELLIPSIS + core[len(core) - (limit - 1 - head) :]


def _without_parameters(name: str) -> str:
    """The name without a trailing '(...)' parameter list (balanced), when something precedes it."""
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            return name[:i].rstrip() or name
    return name


def top_of(shown: int, total: int, noun: str, criterion: str) -> str:
    """A caption for the first rows of a ranked table, as a sentence: 'The 10 of 33 ops with the largest time gap'."""
    return f"The {shown:,} of {total:,} {noun} {criterion}"


def label(text: object) -> str:
    """Untrusted text inside a widget, tab or metric label (the same markdown subset, so the same escape)."""
    return md(text)


def plotly(text: object) -> str:
    """Untrusted text for Plotly, whose text is an HTML subset (<a href>, <b>, <br>): tags become literal."""
    return html.escape(_CONTROL.sub(" ", str(text)), quote=False)


def svg(text: object) -> str:
    """Untrusted text inside an SVG picture (element text or a quoted attribute): XML-escaped, on one line."""
    return html.escape(_CONTROL.sub(" ", str(text)), quote=True)


def ms(us: float | None) -> str:
    """Microseconds as a readable millisecond figure; '—' when there is none."""
    if us is None or not math.isfinite(us):
        return "—"
    return f"{us / 1000:,.3f} ms" if abs(us) < 10_000 else f"{us / 1000:,.1f} ms"


def ratio(value: float | None) -> str:
    """A trace 1 / trace 2 ratio; '—' when a side has none."""
    return "—" if value is None or not math.isfinite(value) else f"{value:.2f}×"


def ratio_tick(value: float) -> str:
    """A log-axis tick: 2×, 1×, 1/2."""
    return f"{value:g}×" if value >= 1 else f"1/{1 / value:g}"
