"""A GPU timeline of the out-of-core sort's copies and sorts (bench/external.py --trace).

Every upload and download of a copy lane and every local sort by the backend's engine is
bracketed by CUDA events on the stream it runs on; after the sort, each span's start and end
(ms from the first event) are written out, with a summary per kind: count, busy ms, GB/s while
busy, and how much of the wall time the kind kept its stream busy. Where the runs phase falls
short of the PCIe rate, this says whether the copies wait on each other, on the sorts or on
the host (gaps in every lane at once).
"""

from __future__ import annotations

import time

import cupy

from distsort.backend import GpuCopyLane


class Tracer:
    """Installs itself around GpuCopyLane.upload/download and engine.sort until removed."""

    def __init__(self, engine):
        self.spans: list[tuple] = []  # kind, bytes, start and end events, host seconds in, out
        self.engine, self.saved = engine, {}

    def _span(self, kind: str, nbytes: int, stream, call):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        called = time.perf_counter()
        start.record(stream)
        result = call()
        end.record(stream)
        self.spans.append((kind, nbytes, start, end, called, time.perf_counter()))
        return result

    def install(self) -> None:
        upload, download, sort = GpuCopyLane.upload, GpuCopyLane.download, self.engine.sort
        self.saved = {"upload": upload, "download": download}

        def traced_upload(lane, host, out=None):
            return self._span("upload", host.nbytes, lane.stream,
                              lambda: upload(lane, host, out))

        def traced_download(lane, column, host):
            return self._span("download", host.nbytes, lane.stream,
                              lambda: download(lane, column, host))

        def traced_sort(keys, *args, **kwargs):
            return self._span("sort", keys.nbytes, cupy.cuda.get_current_stream(),
                              lambda: sort(keys, *args, **kwargs))

        GpuCopyLane.upload, GpuCopyLane.download = traced_upload, traced_download
        self.engine.sort = traced_sort

    def remove(self) -> None:
        GpuCopyLane.upload, GpuCopyLane.download = self.saved["upload"], self.saved["download"]
        del self.engine.sort  # the instance attribute: the class's method again

    def timeline(self) -> dict:
        """Spans (kind, bytes, start and end ms on the device; ms when the host made the call and
        when it returned, from the first call) and a summary per kind; waits for the device."""
        cupy.cuda.Device().synchronize()
        if not self.spans:
            return {"spans": [], "summary": {}}
        first, host = self.spans[0][2], self.spans[0][4]
        ms = cupy.cuda.get_elapsed_time
        times = [(kind, nbytes, ms(first, start), ms(first, end), 1e3 * (called - host),
                  1e3 * (back - host)) for kind, nbytes, start, end, called, back in self.spans]
        zero = min(t[2] for t in times)
        spans = [(kind, nbytes, start - zero, end - zero, called, back)
                 for kind, nbytes, start, end, called, back in times]
        wall = max(s[3] for s in spans)
        summary = {}
        for kind in sorted({s[0] for s in spans}):
            mine = [s for s in spans if s[0] == kind]
            busy = sum(s[3] - s[2] for s in mine)
            moved = sum(s[1] for s in mine)
            summary[kind] = {"count": len(mine), "busy_ms": busy, "wall_ms": wall,
                             "busy_fraction": busy / wall if wall else 0.0,
                             "gb_per_s_while_busy": moved / busy / 1e6 if busy else 0.0}
        return {"spans": spans, "summary": summary}


def describe(summary: dict) -> str:
    """One line per kind."""
    return "\n".join(f"trace {kind}: {s['count']} spans, busy {s['busy_ms']:.1f} of "
                     f"{s['wall_ms']:.1f} ms ({s['busy_fraction']:.0%}), "
                     f"{s['gb_per_s_while_busy']:.1f} GB/s while busy"
                     for kind, s in summary.items())
