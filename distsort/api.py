"""Library entry points: each rank passes its piece, each rank gets back its sorted shard.

The shards, concatenated in rank order, are the whole data set sorted. Arrays come back as the
kind that came in (NumPy in, NumPy out; CuPy in, CuPy out; lists and other array-likes as
NumPy). Keys come back in the dtype the rank passed, its byte order included (as numpy.sort
gives them); values in native byte order. Pieces may come in either byte order, mixed across
ranks: every array is brought to native order before anything crosses a rank.

Every call is collective over `comm` (default MPI.COMM_WORLD), and every rank must call alike:
the same dtypes (an empty piece too), options and backend, else every rank raises
DistsortError (inputs.py).

`out=` (host inputs) writes the shard into the caller's NumPy arrays instead of new ones, so a
large output can be allocated (pinned, first-touched, reused) before and apart from the sort:
C-contiguous, writeable, the result's dtype in native byte order and row shape, not overlapping
the inputs, with at least as many rows as the shard (shard_capacity(total, ranks) rows always
suffice). The result is then the first rows of `out`, a view, whichever path sorted.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from . import fields
from .errors import DistsortError, agree
from .inputs import Call, as_array, begin, keys_check, native, on_gpu
from .keys import NumericCodec, numeric_codec, record_key_words, stand_ins
from .outofcore import sort as outofcore
from .outofcore.sources import check_out_rows
from .payload import check_payload, restored, stored
from .phases import phase
from .pipeline import distributed_sort, sort_as_one, sorts_as_one
from .report import HostClock, SortReport
from .runtime import Runtime, get_runtime
from .steps.partition import codes_raw_numbers
from .transport import row_bytes


def sort(keys, comm=None, *, descending: bool = False, stable: bool = False,
         backend: str | None = None, report: SortReport | None = None,
         device_memory: int | str | None = None, out: np.ndarray | None = None, order=None,
         overwrite_input: bool = False):
    """Sort 1-D keys across all ranks; return this rank's shard of the result.

    Structured keys sort as numpy.sort(keys, order=order) sorts them: by the fields in order
    (a name or a list), then by the others, stably (fields.py).

    device_memory (bytes, or a size like "8GiB") bounds the device memory a rank may use; when
    a rank's shard does not fit, the out-of-core sort runs (outofcore/). Default: a safe
    fraction of the free device memory. Likewise for sort_pairs, argsort and sort_records.
    out: a NumPy array for the shard (see the module doc).
    overwrite_input: the sort may use the keys' memory as its own; their contents afterwards
    are unspecified (as scipy's overwrite_a). Where one rank sorts every row it spares a copy
    of them (on CPUs a pass over new memory, on GPUs an array of their size).
    """
    keys = as_array(keys, "keys")
    outs = begin(comm, backend, Call({"keys": keys}, {"descending": descending, "stable": stable,
                                                      "order": order},
                                     [keys_check(keys, order)], _listed(out), [(keys.dtype, ())],
                                     device_memory, report))
    if fields.by_fields(keys.dtype):
        rows = _by_fields(native(keys), [], order, descending, comm, backend, report,
                          device_memory, outs, keys_back=True)
        return _as_given(rows[0], keys.dtype, outs)
    codes, direction, stand = _stand_ins(native(keys), descending)
    keys_out, _ = _sort_numeric(codes, None, comm, direction, stable, backend, report,
                                device_memory, _code_outs(outs, stand), overwrite_input)
    return _as_given(_from_codes(keys_out, stand, outs), keys.dtype, outs)


def sort_pairs(keys, values, comm=None, *, descending: bool = False, stable: bool = False,
               backend: str | None = None, report: SortReport | None = None,
               device_memory: int | str | None = None, out: tuple | None = None, order=None,
               overwrite_input: bool = False):
    """Sort keys and permute values (1-D of any fixed-size dtype, or 2-D rows) alike; return
    both shards (structured keys: by order, as sort). Values of dtypes CuPy lacks (datetime64,
    strings, structured) come back as NumPy arrays (payload.py).

    out: a (keys, values) pair of NumPy arrays for the shards (see the module doc).
    overwrite_input: as sort's, for the keys and the values."""
    keys, values = as_array(keys, "keys"), as_array(values, "values")

    def rows_match() -> None:
        if values is None or getattr(values, "ndim", 0) < 1 or len(values) != len(keys):
            raise DistsortError(f"values must have one row per key: got {_len(values)} values "
                                f"for {len(keys)} keys")
        check_payload(values.dtype)

    like = [(keys.dtype, ())] + ([] if values is None else [(values.dtype, values.shape[1:])])
    outs = begin(comm, backend, Call({"keys": keys, "values": values},
                                     {"descending": descending, "stable": stable,
                                      "order": order},
                                     [keys_check(keys, order), rows_match], out, like,
                                     device_memory, report))
    if fields.by_fields(keys.dtype):
        keys_out, values_out = _by_fields(native(keys), [native(values)], order, descending,
                                          comm, backend, report, device_memory, outs,
                                          keys_back=True)
        return _as_given(keys_out, keys.dtype, outs), values_out
    if outs is not None:
        outs[1] = stored(outs[1], into=True)  # a view of the caller's array, if the values
        # travel as bytes
    codes, direction, stand = _stand_ins(native(keys), descending)
    keys_out, values_out = _sort_numeric(codes, stored(native(values)), comm, direction, stable,
                                         backend, report, device_memory, _code_outs(outs, stand),
                                         overwrite_input)
    return (_as_given(_from_codes(keys_out, stand, outs), keys.dtype, outs),
            restored(values_out, values))


def argsort(keys, comm=None, *, descending: bool = False, backend: str | None = None,
            report: SortReport | None = None, device_memory: int | str | None = None,
            out: np.ndarray | None = None, order=None):
    """Global input positions (int64) of this rank's shard of the stably sorted keys
    (structured keys: by order, as sort).

    out: an int64 NumPy array for them (see the module doc)."""
    keys = as_array(keys, "keys")
    outs = begin(comm, backend, Call({"keys": keys}, {"descending": descending, "order": order},
                                     [keys_check(keys, order)], _listed(out), [(np.int64, ())],
                                     device_memory, report))
    if fields.by_fields(keys.dtype):
        start = _offset(comm if comm is not None else MPI.COMM_WORLD, len(keys))
        positions = np.arange(start, start + len(keys), dtype=np.int64)
        return _by_fields(native(keys), [positions], order, descending, comm, backend, report,
                          device_memory, outs)[0]
    keys, descending, _ = _stand_ins(native(keys), descending)
    rt = _runtime(keys, comm, backend)
    codec = numeric_codec(keys.dtype, descending, canonical=True)
    replayed = _replayed(rt, keys, "argsort", codec, (report, device_memory, outs))
    if replayed is not None:
        return replayed
    job = outofcore.plan(rt, keys, device_memory, extra_row_bytes=8)
    if job:
        return outofcore.argsort(job, keys, descending, _report(report, rt), outs)
    dev_keys, to_caller = _prepare(rt, keys)
    report = _report(report, rt)
    if _orders_numbers(rt, codec, lossy=True):
        order = sort_as_one(rt, report, [dev_keys],
                            lambda c, **more: [rt.backend.engine.argsort(c[0], codec=codec,
                                                                         **more)])
        return _into(rt.comm, outs, [to_caller(order[0])])[0]
    offset = _offset(rt.comm, len(dev_keys))
    with phase(report, "encode", rt.backend.clock()):
        positions = rt.xp.arange(offset, offset + len(dev_keys), dtype=np.int64)
        columns = [codec.encode(dev_keys, rt.xp), positions]
    out = distributed_sort(rt, columns, _first, report)
    return _into(rt.comm, outs, [to_caller(out[1])])[0]


def sort_records(records, key_size: int, comm=None, *, descending: bool = False,
                 backend: str | None = None, report: SortReport | None = None,
                 device_memory: int | str | None = None, out: np.ndarray | None = None):
    """Sort fixed-size byte records ((n, record_size) uint8) by their first key_size bytes.

    out: an (m, record_size) uint8 NumPy array for the shard (see the module doc)."""
    records = as_array(records, "records")

    def check() -> None:
        if not isinstance(key_size, (int, np.integer)) or isinstance(key_size, bool):
            raise DistsortError(f"key_size must be an int; got {key_size!r}")
        if records.ndim != 2 or records.dtype != np.uint8 or not 0 < key_size <= records.shape[1]:
            raise DistsortError(
                f"records must be (n, record_size) uint8 bytes with 0 < key_size <= record_size; "
                f"got {records.dtype} of shape {records.shape} and key_size {key_size}")

    outs = begin(comm, backend, Call({"records": records},
                                     {"key_size": key_size, "descending": descending}, [check],
                                     _listed(out), [(records.dtype, records.shape[1:])],
                                     device_memory, report))
    rt = _runtime(records, comm, backend)
    job = outofcore.plan(rt, records, device_memory)
    if job:
        return outofcore.sort_records(job, records, key_size, descending, _report(report, rt),
                                     outs)
    dev_records, to_caller = _prepare(rt, records)
    xp = rt.xp

    def words(columns):
        return record_key_words(columns[0], key_size, xp, descending)

    out = distributed_sort(rt, [xp.ascontiguousarray(dev_records)], words, _report(report, rt))
    return _into(rt.comm, outs, [to_caller(out[0])])[0]


def _sort_numeric(keys, values, comm, descending, stable, backend, report, device_memory,
                  outs=None, overwrite: bool = False):
    """overwrite: the sort may use the keys' (and values') memory; it may too where they are
    copies already, brought to the other side of the bus."""
    rt = _runtime(keys, comm, backend)
    codec = numeric_codec(keys.dtype, descending, canonical=stable)
    if not codec.lossy:
        replayed = _replayed(rt, keys, "sort", codec, (report, device_memory, outs), values)
        if replayed is not None:
            return (replayed, None) if values is None else replayed
    job = outofcore.plan(rt, keys, device_memory, values)
    if job:
        report = _report(report, rt)
        return outofcore.sort_numeric(job, keys, values, descending, stable, report, outs)
    dev_keys, to_caller = _prepare(rt, keys)
    report, clock = _report(report, rt), rt.backend.clock()
    given = [] if values is None else [rt.xp.asarray(values)]
    if codec.identity or _orders_numbers(rt, codec):  # no encode or decode pass: no phase
        owned = overwrite or all(_moved(rt, a) for a in (keys, values) if a is not None)
        out = distributed_sort(rt, [dev_keys] + given, _first, report,
                               {"codec": codec, "overwrite": owned})
        keys_out = to_caller(out[0])
    else:
        on_the_way = _coded_on_the_way(rt, codec, [dev_keys] + given)
        if on_the_way:  # by the partition's passes (no encode phase)
            columns, carried = [dev_keys], False
        else:
            with phase(report, "encode", clock):
                columns, carried = _encoded(rt, codec, dev_keys)
        out = distributed_sort(rt, columns + given, _first, report,
                               codec=codec if on_the_way else None)
        with phase(report, "decode", clock):  # and back to the caller's memory
            keys_out = to_caller(out[1] if carried else codec.decode(out[0], rt.xp,
                                                                     in_place=True))
    values_out = to_caller(out[-1]) if values is not None else None
    if outs is not None:
        keys_out, *rest = _into(rt.comm, outs, [keys_out, values_out][: len(outs)])
        values_out = rest[0] if rest else None
    return keys_out, values_out


def _by_fields(keys, others: list, order, descending: bool, comm, backend, report,
               device_memory, outs: list | None, keys_back: bool = False) -> list:
    """Rows sorted by their fields (fields.py: structured keys, bytes, strings, complex): the keys
    where keys_back, then the other arrays (host, one row per key), in that order, as byte
    records behind the fields' key; in the caller's out arrays where given. Bytes and strings
    come back from their key (fields.decoded); structured rows travel beside it. Complex CuPy
    keys (the one kind of these CuPy holds) go through host memory and come back as CuPy arrays,
    as every result of CuPy keys does."""
    if on_gpu(keys):
        import cupy

        rows = _by_fields(keys.get(), [cupy.asnumpy(a) for a in others], order, descending,
                          comm, backend, report, device_memory, outs, keys_back)
        return [cupy.asarray(a) for a in rows]
    comm = comm if comm is not None else MPI.COMM_WORLD
    timed = report if report is not None else SortReport(timed_phases=False)
    timed.rank = comm.Get_rank()  # the watchdog's (sort_records notes the rest)
    decoded = keys_back and fields.from_key(keys.dtype)
    carried = ([keys] if keys_back and not decoded else []) + others
    with phase(timed, "encode", HostClock()):  # the keys made and the rows put behind them
        # (agreed: a rank out of memory here leaves none waiting in the sort's collectives)
        widths = {name: comm.allreduce(width, op=MPI.MAX)  # every rank's keys of one width
                  for name, width in agree(comm, lambda: fields.char_bytes(keys)).items()}
        records, key_size = agree(comm, lambda: fields.keyed(keys, order, descending, carried,
                                                             widths))
    out = sort_records(records, key_size, comm, backend=backend, report=report,
                       device_memory=device_memory)
    with phase(timed, "decode", HostClock()):
        rows = agree(comm, lambda: _rows_back(out, key_size, carried,
                                              keys.dtype if decoded else None, descending,
                                              widths))
    return _into(comm, outs, rows)


def _rows_back(out, key_size: int, carried: list, decoded: np.dtype | None, descending: bool,
               widths: dict) -> list:
    """The arrays taken back out of sorted byte records (_by_fields): first, where decoded
    names their dtype, the keys made from the key; then each carried array from its bytes."""
    ends = np.cumsum([key_size] + [row_bytes(c) for c in carried])
    rows = [np.ascontiguousarray(out[:, a:b]).view(c.dtype).reshape((-1,) + c.shape[1:])
            for a, b, c in zip(ends[:-1], ends[1:], carried)]
    if decoded:
        rows.insert(0, fields.decoded(out[:, :key_size], decoded, descending, widths))
    return rows


def _stand_ins(keys, descending: bool) -> tuple:
    """(keys, descending, None) for numbers; for bool, datetime64 and timedelta64 keys their
    stand-ins (keys.StandIns), the order to sort those in, and the StandIns."""
    stand = stand_ins(keys.dtype, descending)
    if stand is None:
        return keys, descending, None
    return stand.encode(keys), stand.sort_descending, stand


def _code_outs(outs: list | None, stand) -> list | None:
    """The caller's out arrays, the keys' viewed as their stand-ins: the sort writes those."""
    if outs is None or stand is None:
        return outs
    return [outs[0].view(stand.code_dtype)] + outs[1:]


def _from_codes(keys_out, stand, outs: list | None):
    """Sorted keys from their stand-ins; where those lie in the caller's out array (outs
    given), decoded in place there."""
    if stand is None:
        return keys_out
    if outs is not None:
        keys_out[...] = stand.bits(keys_out).view(stand.code_dtype)
        return keys_out.view(stand.dtype)
    return stand.decode(keys_out)


def _into(comm, outs: list | None, results: list) -> list:
    """The in-memory results copied into the caller's out arrays (their first rows), else as
    they are. Every rank raises if any rank's out is too short for its shard."""
    if outs is None:
        return results
    agree(comm, lambda: check_out_rows(outs, len(results[0])))
    for o, r in zip(outs, results):
        o[: len(r)] = r
    return [o[: len(r)] for o, r in zip(outs, results)]


def _runtime(array, comm, backend: str | None) -> Runtime:
    """The runtime that sorts array: without an explicit backend, CuPy arrays are sorted on
    the GPU and NumPy arrays on the CPU."""
    return get_runtime(comm, backend or ("gpu" if on_gpu(array) else "cpu"))


def _replayed(rt: Runtime, keys, op: str, codec: NumericCodec, asked: tuple, values=None):
    """A sort ('sort' or 'argsort'; a sort with values: of the pairs) that one rank's engine
    replays from a graph it keeps for the kind (local/graphs.py): its result, straight from the
    engine, where the caller asks for nothing else (asked: no report, device_memory or out
    arrays) of a sort of device keys (and values); else None. The pipeline's layers (plan,
    report, phase, watchdog) would cost the host more than the sort's own launch, and the
    device waits for them (bench/RESULTS.md, session 44)."""
    if any(a is not None for a in asked) or rt.comm.Get_size() != 1 or not on_gpu(keys):
        return None
    if values is not None and not on_gpu(values):
        return None
    replay = getattr(rt.backend.engine, "replay", None)
    if replay is None:
        return None
    return replay(keys, op, codec) if values is None else replay(keys, "pairs", codec, values)


def _moved(rt: Runtime, array) -> bool:
    """Is array copied on its way to rt's device (host to GPU, or GPU to host)?"""
    return on_gpu(array) != (rt.backend.name == "gpu")


def _prepare(rt: Runtime, array) -> tuple[object, object]:
    """The array on rt's device, and a function returning results as given."""
    gpu = on_gpu(array)
    if rt.backend.name == "gpu":
        import cupy

        return cupy.asarray(array), (lambda a: a) if gpu else cupy.asnumpy
    if gpu:
        import cupy

        return array.get(), cupy.asarray
    return np.asarray(array), np.asarray


def _as_given(keys, dtype: np.dtype, outs: list | None):
    """Keys in the byte order the caller passed them (NumPy results not in the caller's out=,
    which is native)."""
    if outs is not None or not isinstance(keys, np.ndarray):
        return keys
    return keys.astype(dtype, copy=False)


def _offset(comm, n: int) -> int:
    return comm.exscan(n) or 0


def _report(report: SortReport | None, rt: Runtime) -> SortReport:
    return (report if report is not None else SortReport(timed_phases=False)).ran_on(rt)


def _first(columns: list) -> list:
    """The key words of numeric columns: the first column, the keys' codes."""
    return [columns[0]]


def _orders_numbers(rt: Runtime, codec: NumericCodec, lossy: bool = False) -> bool:
    """Whether one rank sorts every row (pipeline.sorts_as_one) on an engine that orders raw
    numbers as their codes (engine.py: codec), so that the keys need no encode or decode pass;
    lossy: whether the sort gives back positions only (argsort), so a canonical codec may merge
    keys' bits."""
    return (sorts_as_one(rt) and getattr(rt.backend.engine, "orders_numbers", False)
            and (lossy or not codec.lossy))


def _coded_on_the_way(rt: Runtime, codec: NumericCodec, columns: list) -> bool:
    """Whether the keys go to the pipeline raw, to be coded by the partition's passes as they
    group them (steps/partition.py: CPU ranks, keys alone or with a column of values, a codec
    that loses no bits), not by an encode pass before it."""
    return not sorts_as_one(rt) and codes_raw_numbers(rt, columns, codec)


def _encoded(rt: Runtime, codec: NumericCodec, keys) -> tuple[list, bool]:
    """[the keys' codes], with the keys themselves after them where the codes cannot give
    every rank's keys back (canonical codes of -0.0 or of NaNs other than the one NaN, for
    stable float sorts: then the sort carries them, a column more), and whether it does."""
    merged = rt.xp.zeros(1, dtype=np.uint32) if codec.lossy else None
    codes = codec.encode(keys, rt.xp, merged)
    carried = codec.lossy and rt.comm.allreduce(bool(merged[0]), op=MPI.LOR)
    return [codes, keys] if carried else [codes], carried


def _listed(out) -> list | None:
    return None if out is None else [out]


def _len(values) -> str:
    if values is None:
        return "no"
    return str(len(values)) if getattr(values, "ndim", 0) >= 1 else "a scalar as"
