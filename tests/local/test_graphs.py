"""The kept graphs' bookkeeping (distsort/local/graphs.py) without a GPU: CuPy stood in for by
a fake that records what the graphs ask of it (captures, replays, device waits), so that when a
graph is made, kept, evicted, released or given up on is checked here; the replays' results
are checked on GPUs (test_graphs_gpu.py)."""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
import types

import numpy as np
import pytest

from distsort.local import graphs


class _Memory:
    def __init__(self, array):
        self.array = array

    @property
    def ptr(self) -> int:
        return self.array.ctypes.data

    def copy_from_host_async(self, address: int, nbytes: int, stream=None) -> None:
        ctypes.memmove(self.ptr, address, nbytes)


class _Array(np.ndarray):
    @property
    def data(self):
        return _Memory(self)


class _Fake:
    """What graphs.py uses of CuPy, noting captures, launches and device waits."""

    def __init__(self, stream_ptr: int = 0):
        self.log: list = []
        fake = self

        class OutOfMemoryError(Exception):
            pass

        class CUDARuntimeError(Exception):
            pass

        class Stream:
            def __init__(self, non_blocking=False):
                self.ptr = stream_ptr

            def record(self):
                return types.SimpleNamespace(synchronize=lambda: fake.log.append("wait"))

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                pass

            def begin_capture(self, mode):
                fake.log.append("capture")

            def end_capture(self):
                return types.SimpleNamespace(launch=lambda stream: fake.log.append("launch"))

            def synchronize(self):
                pass

        class Event:
            def __init__(self, disable_timing=False):
                pass

            def record(self, stream=None):
                pass

            def synchronize(self):
                fake.log.append("wait")

        class MemoryPool:
            def malloc(self, n):
                return None

            def total_bytes(self):
                return fake.pool_bytes

        class Device:
            mem_info = (0, 1 << 40)  # (free, total) bytes

            def __init__(self, device=None):
                self.id = 3 if device is None else device

        runtime = types.SimpleNamespace(streamCaptureModeRelaxed=2, streamPerThread=2,
                                        CUDARuntimeError=CUDARuntimeError)
        self.pool_bytes = 100
        self.module = types.SimpleNamespace(
            cuda=types.SimpleNamespace(
                MemoryPool=MemoryPool, Stream=Stream, Device=Device, Event=Event,
                runtime=runtime,
                memory=types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError),
                get_current_stream=lambda: Stream(),
                using_allocator=lambda malloc: contextlib.nullcontext()),
            empty_like=lambda a: np.empty_like(a).view(_Array), uint64=np.uint64,
            zeros=lambda n, dtype: np.zeros(n, dtype).view(_Array),
            ndarray=lambda shape, dtype: np.empty(shape, dtype).view(_Array))


@pytest.fixture
def fake(monkeypatch):
    made = _Fake()
    monkeypatch.setitem(sys.modules, "cupy", made.module)
    return made


def keys(n: int = 8, values: bool = False) -> tuple:
    """What a sort is given: (keys, values or None)."""
    column = np.arange(n, dtype=np.uint32).view(_Array)
    return column, (column + 1).view(_Array) if values else None


def sort(buffers, ends) -> tuple:
    return buffers  # (keys, values or None)


def replayed_on(kept: graphs.Graphs, given, result) -> bool:
    """Whether the one kept graph's last replay read `given` and wrote `result` (keys, values
    or None): its ends words (radix.cu), set before the launch, hold their addresses (0: none
    given or wanted)."""
    (graph,) = kept.graphs.values()
    words = [0 if a is None else a.data.ptr for a in given + result]
    shaped = all((a is None) == (b is None) and (a is None or (a.shape, a.dtype) == (b.shape,
                                                                                    b.dtype))
                 for a, b in zip(given, result))
    return shaped and graph.ends.tolist() == words and words[2] not in words[:2]


@pytest.mark.parametrize("values", [False, True])
def test_a_graph_is_captured_once_then_replayed(fake, values):
    """(The fake replays nothing: that each replay sorts its own keys is test_graphs_gpu.py's.)"""
    kept = graphs.Graphs()
    for _ in range(3):
        given = keys(values=values)
        assert replayed_on(kept, given, kept.run(("k",), given, sort))
    assert fake.log == ["capture", "launch", "launch", "launch"] and len(kept.graphs) == 1


def test_a_replay_alone_runs_only_a_kept_graph_and_notes_nothing(fake):
    kept = graphs.Graphs()
    assert kept.replay(("k",), keys()) is None
    assert not kept.seen and not kept.graphs and fake.log == []
    kept.run(("k",), keys(), sort)
    given = keys()
    assert replayed_on(kept, given, kept.replay(("k",), given))
    assert fake.log == ["capture", "launch", "launch"]


def test_the_kept_graphs_have_a_share_of_the_devices_memory(fake, monkeypatch):
    assert graphs.room() == (1 << 40) // graphs.SHARE  # the fake device's total: 1 TiB
    monkeypatch.setattr(fake.module.cuda.Device, "mem_info", (0, 1 << 30))
    assert graphs.room() == graphs.FLOOR_BYTES


def test_a_graph_larger_than_the_room_is_not_kept(fake, monkeypatch):
    """Its sort's results are returned; then its kind sorts without a graph (None)."""
    monkeypatch.setattr(graphs, "room", lambda: fake.pool_bytes - 1)
    kept = graphs.Graphs()
    assert kept.run(("k",), keys(), sort) is not None
    assert not kept.graphs and fake.log == ["capture", "launch", "wait"]
    assert kept.run(("k",), keys(), sort) is None and fake.log.count("capture") == 1


def test_the_least_recently_used_graph_goes_after_its_last_replay(fake, monkeypatch):
    monkeypatch.setattr(graphs, "room", lambda: 250)  # two graphs of fake.pool_bytes
    kept = graphs.Graphs()
    for kind in ("a", "b", "a", "c"):  # "a" used again after "b": "b" is the one to go
        kept.run((kind,), keys(), sort)
    assert [key[0] for key in kept.graphs] == ["a", "c"]
    assert fake.log == ["capture", "launch", "capture", "launch", "launch", "capture", "launch",
                        "wait"]
    fake.log.clear()
    kept.release()
    assert not kept.graphs and fake.log == ["wait", "wait"]
    assert graphs._where(("k",)) == ("k", 3, 0, 0)  # the device, stream and thread


@pytest.mark.parametrize("failure", ["OutOfMemoryError", "CUDARuntimeError"])
@pytest.mark.parametrize("when", ["capture", "first replay"])
def test_a_graph_that_cannot_be_made_is_given_up(fake, monkeypatch, failure, when):
    """No memory for its buffers (or a capture cut short by it) in the capture or the first
    launch: None, for the caller to sort without one, and nothing kept."""
    error = getattr(fake.module.cuda.memory if failure == "OutOfMemoryError"
                    else fake.module.cuda.runtime, failure)

    calls = []

    def failing(buffer, ends) -> tuple:
        calls.append(1)
        if when == "capture" and len(calls) == 2:  # between begin_capture and end_capture
            raise error("no memory")
        return buffer

    def launch(self, keys):
        raise error("no memory")

    if when == "first replay":
        monkeypatch.setattr(graphs._Graph, "run", launch)
    kept = graphs.Graphs()
    assert kept.run(("k",), keys(), failing) is None
    assert not kept.graphs and fake.log.count("capture") == 1
    assert kept.run(("k",), keys(), failing) is None  # not tried again
    assert fake.log.count("capture") == 1


def test_threads_on_the_per_thread_stream_keep_graphs_apart(monkeypatch):
    """Every thread's per-thread default stream has the same address: a graph (its buffers)
    serves one thread there; on other streams the threads share it, in stream order."""
    for ptr, graphs_made in ((2, 2), (7, 1)):
        made = _Fake(stream_ptr=ptr)
        monkeypatch.setitem(sys.modules, "cupy", made.module)
        kept, failures = graphs.Graphs(), []

        def run(kept=kept, failures=failures) -> None:
            try:
                kept.run(("k",), keys(), sort)
            except Exception as exc:  # a thread's exception would only be a warning
                failures.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
        kept.run(("k",), keys(), sort)
        assert not failures and made.log.count("capture") == graphs_made


def test_a_kind_is_ready_from_its_second_sighting():
    kept = graphs.Graphs()
    assert [kept.ready(("k", 1)) for _ in range(3)] == [False, True, True]
    assert not kept.ready(("k", 2))


def test_held_off_no_kind_is_seen_so_none_is_captured(fake):
    kept = graphs.Graphs()
    with kept.held_off():
        assert [kept.ready(("k",)) for _ in range(3)] == [False] * 3
    assert not kept.seen and fake.log == []
    assert [kept.ready(("k",)) for _ in range(2)] == [False, True]
