"""The dashboard starts numba's background cache fill once per server process, however many sessions ask."""

import threading

from fusion.cache import machine_code
from ui import data


def test_the_background_fill_starts_once_per_process(monkeypatch) -> None:
    started = []
    monkeypatch.setattr(machine_code, "fill_in_background", lambda: started.append(threading.get_ident()))
    data._fill_once.cache_clear()
    try:
        threads = [threading.Thread(target=data.compiled_code) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        data.compiled_code()
        assert len(started) == 1
    finally:
        data._fill_once.cache_clear()
