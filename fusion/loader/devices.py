"""One GPU per trace: a file that records kernels of several GPUs (a rocprofv3 or nsys run of a whole node)
is read as the trace of one of them.

Without a choice it is the GPU with the most kernel time, and a warning says so and how to choose
another (`--device N`, `load(path, device=N)`). Device numbers are the ones the file gives the kernels
(Kineto's `args.device`, rocprofv3's GPU index, CUDA's device id). A trace of one device keeps its
content digest; the trace of a chosen device of a multi-GPU file gets a digest of its own, so no cache
mixes two devices of one file.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from fusion.errors import TraceError
from fusion.loader.columns import MISSING_ID, taken, used_categories
from fusion.loader.kineto import TraceRecords


def select_device(records: TraceRecords, device: int | None = None) -> TraceRecords:
    """The records of one device: `device`, or the one with the most kernel time when the file has several.

    Raises TraceError when `device` has no kernels in the file."""
    kernels = records.kernels
    column = kernels["device"].to_numpy()
    devices, time = _time_per_device(column, kernels["dur"].to_numpy())
    if device is None and len(devices) <= 1:
        return records
    if device is not None and device not in devices:
        found = ", ".join(map(str, devices)) or "none"
        raise TraceError(records.source, f"no kernels on device {device}; its devices with kernels: {found}")
    chosen = device if device is not None else int(devices[int(np.argmax(time))])
    rows = np.flatnonzero(column == chosen)
    table = taken(kernels, rows)
    table["name"] = used_categories(table["name"])
    gpu = records.device_names.get(chosen, records.gpu)
    return dataclasses.replace(
        records,
        kernels=table,
        gpu=gpu,
        gpu_recorded=records.gpu_recorded or chosen in records.device_names,
        digest=records.digest if len(devices) <= 1 else f"{records.digest}:device{chosen}",
        warnings=[*records.warnings, *_device_note(devices, time, chosen, device is None, len(kernels) - len(rows))],
    )


def _time_per_device(column: np.ndarray, dur: np.ndarray) -> tuple[list[int], np.ndarray]:
    """The devices with kernels (MISSING_ID left out), ascending, and their kernel time."""
    known = column != MISSING_ID
    table = pd.Series(dur[known]).groupby(column[known]).sum()
    return [int(d) for d in table.index], table.to_numpy()


def _device_note(devices: list[int], time: np.ndarray, chosen: int, default: bool, left_out: int) -> list[str]:
    if len(devices) <= 1:
        return []
    share = 100 * float(time[devices.index(chosen)]) / (float(time.sum()) or 1.0)
    how = "the one with the most kernel time" if default else "as chosen"
    return [
        f"the file records kernels of {len(devices)} GPUs (devices {', '.join(map(str, devices))}); this trace is "
        f"device {chosen}, {how} ({share:.1f}% of the file's kernel time; {left_out:,} kernel rows of other "
        "devices left out); choose another with --device N (load(path, device=N))"
    ]
