"""Peak GPU rates for Fusion Explorer.

Loads ``gpu_peaks.toml`` (dense peak TFLOP/s per dtype, DRAM TB/s, sources), validates
every row, and answers two questions for a profiler trace:

* ``PeakTable.lookup(name)`` - which GPU is this ``deviceProperties[].name``?
  Case-insensitive exact match on the stripped name; never a substring guess.
* ``GpuPeaks.peak_tflops(dtype, matrix)`` - the peak for a PyTorch ``Input type``.

A user can add or override GPUs with a second TOML file of the same format::

    table = load_peaks(extra="my_gpus.toml")
    # my_gpus.toml, one line:
    # gpu = [{name = "RTX 4090", vendor = "NVIDIA", arch = "sm_89", match = ["NVIDIA GeForce RTX 4090"], bf16_matrix = 165.2, source = ["datasheet"]}]
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_PATH = Path(__file__).with_name("gpu_peaks.toml")

PEAK_KEYS = frozenset(
    {
        "fp64_vector",
        "fp64_matrix",
        "fp32_vector",
        "fp32_matrix",
        "tf32_matrix",
        "bf16_vector",
        "fp16_vector",
        "bf16_matrix",
        "fp16_matrix",
        "fp8_matrix",
        "int8_matrix",
        "fp6_matrix",
        "fp4_matrix",
    }
)
_POSITIVE = frozenset({"hbm_tb_s", "memory_gb", "boost_clock_mhz"}) | PEAK_KEYS
_INTEGERS = frozenset({"compute_units", "devices_per_package"})
_STRINGS = frozenset({"name", "vendor", "arch", "note"})
_LISTS = frozenset({"match", "source"})
ROW_KEYS = _POSITIVE | _INTEGERS | _STRINGS | _LISTS
_REQUIRED = ("name", "vendor", "arch", "match", "source")
_AMBIGUOUS_KEYS = frozenset({"match", "candidates", "source", "note"})
VENDORS = ("AMD", "NVIDIA")

# PyTorch profiler "Input type" strings (and common spellings) -> dtype family.
_DTYPES: dict[str, str] = {
    "double": "fp64",
    "float64": "fp64",
    "torch.float64": "fp64",
    "fp64": "fp64",
    "float": "fp32",
    "float32": "fp32",
    "torch.float32": "fp32",
    "fp32": "fp32",
    "tf32": "tf32",
    "c10::half": "fp16",
    "half": "fp16",
    "float16": "fp16",
    "torch.float16": "fp16",
    "fp16": "fp16",
    "c10::bfloat16": "bf16",
    "bfloat16": "bf16",
    "torch.bfloat16": "bf16",
    "bf16": "bf16",
    "signed char": "int8",
    "int8": "int8",
    "torch.int8": "int8",
    "fp8": "fp8",
    "fp4": "fp4",
    "c10::float4_e2m1fn_x2": "fp4",
    "torch.float4_e2m1fn_x2": "fp4",
    **{f"{p}float8_{v}": "fp8" for p in ("c10::", "torch.", "") for v in ("e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz")},
}


def _norm(name: str) -> str:
    return name.strip().casefold()


@dataclass(frozen=True)
class GpuPeaks:
    """One GPU model as the runtime sees it (per device, dense peaks)."""

    name: str
    vendor: str
    arch: str
    compute_units: int | None
    peaks: dict[str, float]
    hbm_tb_s: float | None
    sources: tuple[str, ...]
    match: tuple[str, ...] = ()
    memory_gb: float | None = None
    boost_clock_mhz: float | None = None
    devices_per_package: int = 1
    note: str = ""

    def peak_tflops(self, dtype: str, matrix: bool, allow_tf32: bool = False) -> float | None:
        """Dense peak TFLOP/s (TOPS for int8) for a PyTorch dtype string, or None.

        ``dtype`` is the profiler's ``Input type`` ("float", "c10::BFloat16",
        "c10::Half", "double", "c10::Float8_e4m3fn[uz]", "c10::Float8_e5m2",
        "signed char"...); unknown dtypes (e.g. "long int") give None.

        ``matrix=True`` (GEMM/conv) uses the ``*_matrix`` rate and falls back to the
        same dtype's ``*_vector`` rate when the part has no matrix unit for it (V100
        FP64, NVIDIA FP32); ``matrix=False`` uses ``*_vector`` only.

        FP32 matrix work: NVIDIA has no FP32 tensor-core rate, so it is rated against
        ``fp32_vector`` (cuBLAS SGEMM on CUDA cores, PyTorch's default). AMD CDNA parts
        with ``fp32_matrix`` use that. Only when the caller says TF32 was enabled
        (``allow_tf32=True``, i.e. ``torch.backends.cuda.matmul.allow_tf32`` /
        ``set_float32_matmul_precision("high")``; the trace does not record it) is
        ``tf32_matrix`` (NVIDIA TF32, AMD XF32) used, if the part has it.
        """
        kind = _DTYPES.get(_norm(dtype))
        if kind is None:
            return None
        if kind == "tf32" or (kind == "fp32" and matrix and allow_tf32 and "tf32_matrix" in self.peaks):
            return self.peaks.get("tf32_matrix") if matrix else None
        vector = self.peaks.get(f"{kind}_vector")
        return self.peaks.get(f"{kind}_matrix", vector) if matrix else vector


@dataclass(frozen=True)
class PeakTable:
    """Validated rows plus an exact-name index."""

    rows: tuple[GpuPeaks, ...]
    _index: dict[str, GpuPeaks] = field(repr=False)
    _ambiguous: dict[str, tuple[GpuPeaks, ...]] = field(repr=False)

    def lookup(self, device_name: str, compute_units: int | None = None) -> GpuPeaks | None:
        """Row whose ``match`` equals ``device_name`` (case-insensitive, stripped), else None.

        A few runtime names cover two parts (e.g. "AMD Instinct MI250X / MI250"); those
        resolve only if ``compute_units`` (the trace's ``numSms``) picks one candidate.
        """
        key = _norm(device_name)
        if key in self._index:
            return self._index[key]
        for row in self._ambiguous.get(key, ()):
            if compute_units is not None and row.compute_units == compute_units:
                return row
        return None

    def __iter__(self) -> Iterator[GpuPeaks]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


def load_peaks(path: str | Path | None = None, extra: str | None = None) -> PeakTable:
    """Load and validate the table; rows in ``extra`` are added and win on shared names."""
    rows, ambiguous = _load_file(Path(path) if path else DEFAULT_PATH)
    index = {_norm(m): row for row in rows for m in row.match}
    if extra:
        extra_rows, extra_ambiguous = _load_file(Path(extra))
        for row in extra_rows:
            for m in row.match:
                index[_norm(m)] = row
                ambiguous.pop(_norm(m), None)
        for key, cands in extra_ambiguous.items():
            index.pop(key, None)
            ambiguous[key] = cands
        rows += extra_rows
    live = {id(r) for r in index.values()} | {id(r) for c in ambiguous.values() for r in c}
    return PeakTable(tuple(r for r in rows if id(r) in live), index, ambiguous)


def _load_file(path: Path) -> tuple[list[GpuPeaks], dict[str, tuple[GpuPeaks, ...]]]:
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: invalid TOML: {e}") from e
    if unknown := set(data) - {"gpu", "ambiguous"}:
        raise ValueError(f"{path}: unknown top-level key(s) {sorted(unknown)}; expected [[gpu]] / [[ambiguous]]")

    rows: list[GpuPeaks] = []
    seen: dict[str, str] = {}  # normalized match string -> row name
    by_name: dict[str, GpuPeaks] = {}
    for i, raw in enumerate(_table_list(data, "gpu", path), 1):
        where = f"{path}: [[gpu]] #{i} ({raw.get('name', '?')!r})"
        row = _parse_row(raw, where)
        if row.name in by_name:
            raise ValueError(f"{where}: duplicate name {row.name!r}")
        for m in row.match:
            if _norm(m) in seen:
                raise ValueError(f"{where}: match string {m!r} is also listed by row {seen[_norm(m)]!r}")
            seen[_norm(m)] = row.name
        by_name[row.name] = row
        rows.append(row)

    ambiguous: dict[str, tuple[GpuPeaks, ...]] = {}
    for i, raw in enumerate(_table_list(data, "ambiguous", path), 1):
        where = f"{path}: [[ambiguous]] #{i} ({raw.get('match', '?')!r})"
        if unknown := set(raw) - _AMBIGUOUS_KEYS:
            raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}")
        names = _str_list(raw, "candidates", where)
        _str_list(raw, "source", where)
        if missing := [n for n in names if n not in by_name]:
            raise ValueError(f"{where}: candidate(s) {missing} are not rows in this file")
        cands = tuple(by_name[n] for n in names)
        cus = [c.compute_units for c in cands]
        if None in cus or len(set(cus)) != len(cus):
            raise ValueError(f"{where}: candidates need distinct compute_units to be told apart")
        for m in _str_list(raw, "match", where):
            if _norm(m) in seen:
                raise ValueError(f"{where}: match string {m!r} is also listed by row {seen[_norm(m)]!r}")
            seen[_norm(m)] = f"[[ambiguous]] #{i}"
            ambiguous[_norm(m)] = cands
    return rows, ambiguous


def _table_list(data: dict[str, Any], key: str, path: Path) -> list[dict[str, Any]]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ValueError(f"{path}: '{key}' must be an array of tables ([[{key}]])")
    return value


def _str_list(raw: dict[str, Any], key: str, where: str) -> list[str]:
    value = raw.get(key)
    if not value:
        raise ValueError(
            f"{where}: missing or empty '{key}'" + (" (every row needs a source)" if key == "source" else "")
        )
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{where}: '{key}' must be a list of non-empty strings")
    return value


def _parse_row(raw: dict[str, Any], where: str) -> GpuPeaks:
    if unknown := set(raw) - ROW_KEYS:
        raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}")
    if missing := [k for k in _REQUIRED if k not in raw]:
        raise ValueError(f"{where}: missing required key(s) {missing}")
    for key in _STRINGS & raw.keys():
        if not isinstance(raw[key], str) or (key != "note" and not raw[key].strip()):
            raise ValueError(f"{where}: '{key}' must be a non-empty string")
    if raw["vendor"] not in VENDORS:
        raise ValueError(f"{where}: vendor must be one of {VENDORS}, got {raw['vendor']!r}")
    match, sources = _str_list(raw, "match", where), _str_list(raw, "source", where)
    for key in (_POSITIVE | _INTEGERS) & raw.keys():
        value = raw[key]
        ok_type = int if key in _INTEGERS else (int, float)
        if isinstance(value, bool) or not isinstance(value, ok_type) or not value > 0:
            kind = "a positive integer" if key in _INTEGERS else "a positive number"
            raise ValueError(f"{where}: '{key}' must be {kind}, got {value!r}")
    return GpuPeaks(
        name=raw["name"],
        vendor=raw["vendor"],
        arch=raw["arch"],
        compute_units=raw.get("compute_units"),
        peaks={k: float(raw[k]) for k in sorted(PEAK_KEYS & raw.keys())},
        hbm_tb_s=_opt_float(raw, "hbm_tb_s"),
        sources=tuple(sources),
        match=tuple(match),
        memory_gb=_opt_float(raw, "memory_gb"),
        boost_clock_mhz=_opt_float(raw, "boost_clock_mhz"),
        devices_per_package=raw.get("devices_per_package", 1),
        note=raw.get("note", ""),
    )


def _opt_float(raw: dict[str, Any], key: str) -> float | None:
    return float(raw[key]) if key in raw else None
