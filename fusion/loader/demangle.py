"""Kernel symbols as people read them: a code-object symbol (`_ZN2at6native...Ev.kd`) demangled, without `.kd`.

rocprofv3 names a kernel by its code-object symbol: the mangled C++ name with `.kd` (kernel descriptor)
after it. The display name, the one classified and shown, is that name demangled by the C++ runtime's
own demangler (libstdc++'s `__cxa_demangle`, through cxxfilt), without the suffix; the raw symbol is
kept beside it. Each distinct symbol is demangled once. Where no demangler is available, or a name is
not a valid mangled name, the display name is the symbol without its suffix.
"""

from __future__ import annotations

import cxxfilt

CODE_OBJECT_SUFFIX = ".kd"
_MANGLED_PREFIX = "_Z"


def display_name(symbol: str) -> str:
    """`symbol` demangled and without `.kd`; itself when it is neither mangled nor suffixed."""
    base = symbol.removesuffix(CODE_OBJECT_SUFFIX)
    if not base.startswith(_MANGLED_PREFIX):
        return base
    try:
        return cxxfilt.demangle(base)
    except (cxxfilt.Error, UnicodeError):
        return base


def display_names(symbols: list[str]) -> tuple[list[str], dict[str, str]]:
    """The display name of each symbol (each distinct one demangled once), and {display: symbol} where they
    differ (the first symbol of a display name, should two share one)."""
    cache: dict[str, str] = {}
    names = [cache[s] if s in cache else cache.setdefault(s, display_name(s)) for s in symbols]
    raw: dict[str, str] = {}
    for symbol, name in cache.items():
        if name != symbol:
            raw.setdefault(name, symbol)
    return names, raw
