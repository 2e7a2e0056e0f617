"""Library entry points: each rank passes its piece, each rank gets back its sorted shard.

The shards, concatenated in rank order, are the whole data set sorted. Arrays come back as the
kind that came in (NumPy in, NumPy out; CuPy in, CuPy out), in the input's dtype. Every call is
collective over `comm` (default MPI.COMM_WORLD).
"""

from __future__ import annotations

import numpy as np

from . import external
from .errors import DistsortError
from .keys import NumericCodec, record_key_words
from .pipeline import distributed_sort
from .report import SortReport
from .runtime import Runtime, get_runtime


def sort(keys, comm=None, *, descending: bool = False, stable: bool = False,
         backend: str | None = None, report: SortReport | None = None,
         device_memory: int | str | None = None):
    """Sort 1-D numeric keys across all ranks; return this rank's shard of the result.

    device_memory (bytes, or a size like "8GiB") bounds the device memory a rank may use; when
    a rank's shard does not fit, the out-of-core sort runs (external.py). Default: a safe
    fraction of the free device memory. Likewise for sort_pairs, argsort and sort_records.
    """
    keys_out, _ = _sort_numeric(keys, None, comm, descending, stable, backend, report,
                                device_memory)
    return keys_out


def sort_pairs(keys, values, comm=None, *, descending: bool = False, stable: bool = False,
               backend: str | None = None, report: SortReport | None = None,
               device_memory: int | str | None = None):
    """Sort keys and permute values (1-D of any dtype, or 2-D rows) alike; return both shards."""
    if values is None or len(values) != len(keys):
        raise DistsortError(
            f"values must have one row per key: got {_len(values)} values for {len(keys)} keys"
        )
    return _sort_numeric(keys, values, comm, descending, stable, backend, report, device_memory)


def argsort(keys, comm=None, *, descending: bool = False, backend: str | None = None,
            report: SortReport | None = None, device_memory: int | str | None = None):
    """Global input positions (int64) of this rank's shard of the stably sorted keys."""
    job = external.plan(keys, comm, backend, device_memory, extra_row_bytes=8)
    if job:
        return external.argsort(job, keys, descending, _report(report, job.rt))
    rt, dev_keys, to_caller = _prepare(keys, comm, backend)
    codec = NumericCodec(_dtype_of(keys), descending, canonical=True)
    offset = _offset(rt.comm, len(dev_keys))
    positions = rt.xp.arange(offset, offset + len(dev_keys), dtype=np.int64)
    columns = [codec.encode(dev_keys, rt.xp), positions]
    out = distributed_sort(rt, columns, lambda c: [c[0]], _report(report, rt))
    return to_caller(out[1])


def sort_records(records, key_size: int, comm=None, *, descending: bool = False,
                 backend: str | None = None, report: SortReport | None = None,
                 device_memory: int | str | None = None):
    """Sort fixed-size byte records ((n, record_size) uint8) by their first key_size bytes."""
    if records.ndim != 2 or not 0 < key_size <= records.shape[1]:
        raise DistsortError(
            f"records must be (n, record_size) bytes with 0 < key_size <= record_size; "
            f"got shape {records.shape} and key_size {key_size}"
        )
    job = external.plan(records, comm, backend, device_memory)
    if job:
        return external.sort_records(job, records, key_size, descending, _report(report, job.rt))
    rt, dev_records, to_caller = _prepare(records, comm, backend)
    xp = rt.xp

    def words(columns):
        return record_key_words(columns[0], key_size, xp, descending)

    out = distributed_sort(rt, [xp.ascontiguousarray(dev_records)], words, _report(report, rt))
    return to_caller(out[0])


def _sort_numeric(keys, values, comm, descending, stable, backend, report, device_memory):
    job = external.plan(keys, comm, backend, device_memory, values)
    if job:
        report = _report(report, job.rt)
        return external.sort_numeric(job, keys, values, descending, stable, report)
    rt, dev_keys, to_caller = _prepare(keys, comm, backend)
    dtype = _dtype_of(keys)
    codec = NumericCodec(dtype, descending, canonical=stable)
    columns = [codec.encode(dev_keys, rt.xp)]
    if codec.lossy:  # the codes lost -0.0 / NaN bits: carry the original keys along
        columns.append(dev_keys)
    if values is not None:
        columns.append(rt.xp.asarray(values))
    out = distributed_sort(rt, columns, lambda c: [c[0]], _report(report, rt))
    keys_out = to_caller(out[1] if codec.lossy else codec.decode(out[0], rt.xp))
    if isinstance(keys_out, np.ndarray):  # back to the caller's byte order
        keys_out = keys_out.astype(dtype, copy=False)
    values_out = to_caller(out[-1]) if values is not None else None
    return keys_out, values_out


def _prepare(array, comm, backend: str | None) -> tuple[Runtime, object, object]:
    """Runtime, the array on the backend's device, and a function returning results as given.

    Without an explicit backend, CuPy arrays are sorted on the GPU and NumPy arrays on the CPU.
    """
    on_gpu = type(array).__module__.startswith("cupy")
    rt = get_runtime(comm, backend or ("gpu" if on_gpu else "cpu"))
    if rt.backend.name == "gpu":
        import cupy

        if not on_gpu:  # CuPy holds native byte order only
            array = np.asarray(array).astype(np.asarray(array).dtype.newbyteorder("="), copy=False)
        return rt, cupy.asarray(array), (lambda a: a) if on_gpu else cupy.asnumpy
    if on_gpu:
        import cupy

        return rt, array.get(), cupy.asarray
    return rt, np.asarray(array), np.asarray


def _dtype_of(keys) -> np.dtype:
    if getattr(keys, "ndim", 1) != 1:
        raise DistsortError(f"keys must be a 1-D array; got shape {keys.shape}")
    return np.dtype(keys.dtype)


def _offset(comm, n: int) -> int:
    return comm.exscan(n) or 0


def _report(report: SortReport | None, rt: Runtime) -> SortReport:
    report = report if report is not None else SortReport()
    report.rank, report.backend = rt.comm.Get_rank(), rt.backend.name
    report.engine = rt.backend.engine.name
    return report


def _len(values) -> str:
    return "no" if values is None else str(len(values))
