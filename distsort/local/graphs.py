"""Small radix sorts replayed as CUDA graphs: one launch from the host instead of seven.

Below SYNC_MIN keys our kernels (a histogram, a scan, a onesweep pass per digit) take less
device time than CUB's sort (2^20 uint32: 65 against 85 us), but the host spends ~160 us
launching them, so the device waits for the host and CUB's one call wins. A kind of sort seen
before (its size, and what its kernels hold: bits, low, code) is instead captured once into a
graph with buffers of its own. Its kernels read their input and write their results through
four device words (radix.cu: Ends), so each later sort of that kind sets those to its keys
(and values) and to new result arrays, and replays the graph: a few host calls, no copies.

Captured on a kind's second sighting, so a stream of sizes that never repeat captures nothing
(it sorts as before: CUB, or from radix.MIN_N our kernels one by one). A graph runs every
pass, so from radix.GRAPH_MAX our kernels run one by one, skipping the digits that never
vary. The graphs and their buffers are kept per device, stream (and thread, on per-thread
default streams) and kind, least recently used first out, up to room() bytes of buffers an
engine (a graph larger than that is not kept: its kind sorts without one); release() drops
them, each once its last replay has run.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

# The kept graphs' buffers, all together, may hold 1/SHARE of the device's memory, and at
# least FLOOR_BYTES: an argsort of 2^26 uint32 keys holds ~1.5 GiB, within an H200's share
FLOOR_BYTES, SHARE = 512 << 20, 32
SIGHTINGS = 256  # kinds of sort remembered as seen


class _Graph:
    """A captured sort: the buffers its graph uses, the words it reads its ends from, and the
    shapes of its results."""

    def __init__(self, cp, given: tuple, sort: Callable):
        self.cp = cp
        self.pool = cp.cuda.MemoryPool()  # the graph's own blocks, which no other work reuses
        self.stream = cp.cuda.Stream(non_blocking=True)  # a legacy stream cannot be captured
        with cp.cuda.using_allocator(self.pool.malloc), self.stream:
            # what the kernels are given (keys, values or None): the ends stand in for them
            self.given = tuple(None if a is None else cp.empty_like(a) for a in given)
            self.ends = cp.zeros(4, dtype=cp.uint64)  # 0: the kernels' own arrays
            sort(self.given, self.ends)  # loads the kernels, sizes the pool: no cudaMalloc below
            self.stream.begin_capture(cp.cuda.runtime.streamCaptureModeRelaxed)
            try:
                self.result = sort(self.given, self.ends)
            finally:
                self.graph = self.stream.end_capture()
        self.stream.synchronize()
        self.nbytes = self.pool.total_bytes()
        self.done = cp.cuda.Event(disable_timing=True)  # recorded after each replay

    def run(self, given: tuple) -> tuple:
        """The captured sort of given (keys, values or None), on the current stream: new
        arrays."""
        cp = self.cp
        stream = cp.cuda.get_current_stream()
        # cp.ndarray, not empty_like: the latter's Python cost a replay microseconds
        result = tuple(None if r is None else cp.ndarray(r.shape, r.dtype) for r in self.result)
        ends = np.array([0 if a is None else a.data.ptr for a in given + result],
                        dtype=np.uint64)
        # from pageable memory: staged as the call returns, so ends may go at once
        self.ends.data.copy_from_host_async(ends.ctypes.data, ends.nbytes, stream)
        self.graph.launch(stream)
        self.done.record(stream)  # its buffers' last use: a drop waits for this alone
        return result


class Graphs:
    """The kept graphs of one engine (see the module doc)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.graphs: OrderedDict[tuple, _Graph] = OrderedDict()
        self.seen: OrderedDict[tuple, None] = OrderedDict()
        self.failed: OrderedDict[tuple, None] = OrderedDict()  # not tried again
        self.holds = 0  # held_off() bodies under way

    @contextmanager
    def held_off(self) -> Iterator[None]:
        """ready() answers no inside the body and notes no sighting, so the sorts it routes
        neither capture nor replay a graph: for sorts planned within a device-memory budget,
        which has no room for a graph's own buffers."""
        with self.lock:
            self.holds += 1
        try:
            yield
        finally:
            with self.lock:
                self.holds -= 1

    def ready(self, key: tuple) -> bool:
        """Has this kind of sort (key: its size and what its kernels depend on) been seen
        before, so that run() replays or captures a graph for it? Notes a sighting."""
        with self.lock:
            if self.holds:
                return False
            if key in self.seen:
                self.seen.move_to_end(key)
                return True
            self.seen[key] = None
            if len(self.seen) > SIGHTINGS:
                self.seen.popitem(last=False)
            return False

    def replay(self, key: tuple, given: tuple) -> tuple | None:
        """The results of the graph kept for this key, replayed on given (keys, values or
        None); None where none is kept (nothing is noted or captured)."""
        key = _where(key)
        with self.lock:  # the graph's buffers serve one sort at a time, in stream order
            return self._replayed(key, given)

    def _replayed(self, key: tuple, given: tuple) -> tuple | None:
        graph = self.graphs.pop(key, None)
        if graph is None:
            return None
        self.graphs[key] = graph  # the most recently used
        return graph.run(given)

    def run(self, key: tuple, given: tuple, sort: Callable) -> tuple | None:
        """sort(given) by the graph of this key, captured first where there is none; given is
        (keys, values or None). sort takes buffers like given (its own to overwrite) and
        `ends`, four device words that, where not 0, stand for the keys and values it reads and
        for its two results, and returns those two results (arrays, or None where not wanted:
        its ends word stays 0).
        Whatever device memory sort allocates comes from the graph's own pool and goes with
        it: sort must keep none of it beyond its call (a cache of its own). None where the
        device had no memory for a new graph's buffers: the caller sorts without one."""
        import cupy

        key = _where(key)
        with self.lock:
            replayed = self._replayed(key, given)
            if replayed is not None:
                return replayed
            if key in self.failed:
                return None
            try:  # the first replay too: the device loads a graph at its first launch
                graph = _Graph(cupy, given, sort)
                result = graph.run(given)
            except (cupy.cuda.memory.OutOfMemoryError, cupy.cuda.runtime.CUDARuntimeError):
                # no memory for its buffers (a capture cut short says so thus), or a capture
                # CUDA refused: this kind sorts without a graph from now on
                self._failed(key)
                return None
            limit = room()
            if graph.nbytes > limit:  # a kind too large to keep: sorted without a graph
                _drop(graph)
                self._failed(key)
                return result
            self.graphs[key] = graph
            while sum(g.nbytes for g in self.graphs.values()) > limit:
                _drop(self.graphs.popitem(last=False)[1])
            return result

    def _failed(self, key: tuple) -> None:
        """This kind sorts without a graph from now on (not tried again)."""
        self.failed[key] = None
        if len(self.failed) > SIGHTINGS:
            self.failed.popitem(last=False)

    def release(self) -> None:
        with self.lock:
            while self.graphs:
                _drop(self.graphs.popitem()[1])
            self.seen.clear()
            self.failed.clear()


def room() -> int:
    """Bytes the kept graphs of the current device may hold (FLOOR_BYTES, SHARE)."""
    import cupy

    return max(FLOOR_BYTES, cupy.cuda.Device().mem_info[1] // SHARE)


def _where(key: tuple) -> tuple:
    """key, with the current device and stream (and thread, where that is the per-thread
    default stream, whose address every thread shares): a graph's buffers serve one of each."""
    import cupy

    stream = cupy.cuda.get_current_stream().ptr
    per_thread = stream == getattr(cupy.cuda.runtime, "streamPerThread", 2)
    return key + (cupy.cuda.Device().id, stream, threading.get_ident() if per_thread else 0)


def _drop(graph: _Graph) -> None:
    """Let a graph go (its buffers are freed) once its last replay has run: waiting for that
    alone, not the whole device, whose other streams (an exchange's) go on."""
    graph.done.synchronize()
