"""What each rank passes to an entry point, checked on every rank and compared across ranks in
the one collective that each call starts with, before any other.

A rank whose arrays are wrong (keys not 1-D, values of another length, an unsortable dtype, a
wrong out= array) or that calls differently from rank 0 (another dtype -- an empty piece made by
np.empty(0) is float64 --, another order, a NumPy piece where the others pass CuPy) would
otherwise leave the others waiting in a collective or mix bytes of different kinds: here one
rank says what is wrong and every rank raises DistsortError.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from . import fields
from .errors import DistsortError, agree
from .memory import parse_size
from .report import SortReport
from .runtime import requested_backend


@dataclass
class Call:
    """One rank's call: its arrays by name (keys first), the options every rank must give
    alike, the arrays' own checks (raising DistsortError), out= with the (dtype, row shape) of
    each result, and device_memory (which may differ from rank to rank)."""

    arrays: dict
    options: dict = field(default_factory=dict)
    checks: list[Callable[[], None]] = field(default_factory=list)
    out: object = None
    like: list = field(default_factory=list)
    device_memory: int | str | None = None
    report: object = None  # a SortReport (each rank's own, or None), checked like the rest


def as_array(x, name: str):
    """NumPy and CuPy arrays as they are; lists and other array-likes as NumPy arrays. Where
    there is none (None) or NumPy cannot make one (a ragged list), an empty Unmade array that
    carries the error, which begin raises on every rank: a rank alone would leave the others
    waiting."""
    if isinstance(x, np.ndarray) or on_gpu(x):
        return x
    if x is None:
        return _unmade(f"{name}: got None, not an array")
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as exc:
        return _unmade(f"{name}: NumPy cannot make an array of it: {exc}")


def _unmade(why: str) -> Unmade:
    unmade = np.empty(0, np.uint8).view(Unmade)
    unmade.error = DistsortError(why)
    return unmade


class Unmade(np.ndarray):
    """An input as_array could not make an array of; error says why."""

    error: DistsortError


def native(x):
    """x in native byte order: a copy only where it is not (CuPy arrays always are).

    Ranks may pass pieces of either byte order, and the sort moves bytes between them (keys
    carried beside their codes, values); every byte that crosses a rank must mean the same on
    both sides, so every entry point brings its arrays to one order before anything else."""
    if not isinstance(x, np.ndarray) or x.dtype.isnative:
        return x
    return x.astype(x.dtype.newbyteorder("="))


def on_gpu(x) -> bool:
    return type(x).__module__.startswith("cupy")


def begin(comm, backend: str | None, call: Call) -> list | None:
    """Check the call on every rank and compare it with rank 0's: the backend (the keys'
    kind, CuPy or NumPy, where none is named), each array's dtype and row shape, the options.
    One message, and every rank raises, where any rank's call is wrong or differs; else the
    out= arrays (or None)."""
    comm = comm if comm is not None else MPI.COMM_WORLD
    if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:  # every rank sees it
        raise DistsortError(f"comm: give an mpi4py intracommunicator (MPI.COMM_WORLD, a Split "
                            f"of it), not {comm!r}")
    same = _alike(backend, call) if comm.Get_size() > 1 else None  # alone: nothing to compare

    def check() -> list | None:
        for a in call.arrays.values():
            if isinstance(a, Unmade):
                raise a.error
        for a_check in call.checks:
            a_check()
        if call.report is not None and not isinstance(call.report, SortReport):
            raise DistsortError(f"report: give a distsort.SortReport or None, not "
                                f"{type(call.report).__name__}")
        if call.device_memory is not None:
            try:
                parse_size(call.device_memory)
            except ValueError as exc:
                raise DistsortError(f"device_memory: {exc}") from None
        return _outputs(call.out, call.like, list(call.arrays.values()))

    return agree(comm, check, same=same)


def _alike(backend: str | None, call: Call) -> dict:
    """What every rank's call must give alike (errors.agree's `same`)."""
    named = backend or ("gpu" if on_gpu(next(iter(call.arrays.values()))) else "cpu")
    same = {"backend (CuPy arrays: gpu, NumPy: cpu, where none is named)":
            f"backend {requested_backend(named)}"}
    same.update({f"{name} dtype (empty pieces too)": _kind(name, a)
                 for name, a in call.arrays.items() if a is not None})
    same.update({name: f"{name}={_plain(name, value)!r}" for name, value in call.options.items()})
    same["out= (given on every rank or on none)"] = f"out= {'not ' * (call.out is None)}given"
    return same


def _plain(name: str, value):
    """An option as Python gives it: NumPy's scalars (np.int64(4), np.True_) as the int or
    bool they hold, and order= as a list of names ("day", ("day",) and ["day"] name the same
    fields, as in numpy.sort), so that ranks giving either call alike."""
    if name == "order" and isinstance(value, (str, tuple, list)):
        return [value] if isinstance(value, str) else [_plain("", v) for v in value]
    return value.item() if isinstance(value, np.generic) else value


def keys_check(keys, order=None) -> Callable[[], None]:
    """Keys must be a 1-D array of a dtype distsort sorts; order= names fields of structured
    keys only."""
    def check() -> None:
        if getattr(keys, "ndim", None) != 1:
            raise DistsortError(f"keys must be a 1-D array; got shape {getattr(keys, 'shape', ())}")
        fields.sortable(keys.dtype, order)
    return check


def _kind(name: str, a) -> str:
    """'int32 keys': the dtype (native byte order: either order sorts alike), and the row
    shape where rows are not single values."""
    dtype, rows = np.dtype(a.dtype).newbyteorder("="), tuple(a.shape[1:])
    return f"{dtype} {name}" + (f" in rows of shape {rows}" if rows else "")


def _outputs(out, like: list[tuple], inputs: list) -> list | None:
    """The caller's output arrays (one per result), checked. like: (dtype, row shape) per
    result."""
    if out is None:
        return None
    if any(not isinstance(a, np.ndarray) for a in inputs if a is not None):
        raise DistsortError("out= is for host (NumPy) inputs: sort CuPy arrays without it")
    if not isinstance(out, (list, tuple)):
        raise DistsortError(f"out: give a tuple of {len(like)} arrays (one per result), got "
                            f"{type(out).__name__}")
    arrays = list(out)
    if len(arrays) != len(like):
        raise DistsortError(f"out: give {len(like)} arrays (one per result), got {len(arrays)}")
    for array, (dtype, rows) in zip(arrays, like):
        _check_out(array, np.dtype(dtype), tuple(rows), inputs)
    if len(arrays) == 2 and np.may_share_memory(*arrays):  # one result would overwrite the other
        raise DistsortError("out: the keys' and the values' arrays must not overlap")
    return arrays


def _check_out(out, dtype: np.dtype, row_shape: tuple, inputs: list) -> None:
    want = dtype.newbyteorder("=")
    if not isinstance(out, np.ndarray):
        raise DistsortError(f"out must be a NumPy array; got {type(out).__name__}")
    if out.dtype != want:
        raise DistsortError(f"out must have dtype {want} (native byte order); got {out.dtype}")
    if out.shape[1:] != row_shape or out.ndim != 1 + len(row_shape):
        raise DistsortError(f"out must have shape (rows, *{row_shape}); got {out.shape}")
    if not (out.flags.c_contiguous and out.flags.writeable):
        raise DistsortError("out must be a writeable C-contiguous array")
    if any(np.may_share_memory(out, a) for a in inputs if a is not None):
        raise DistsortError("out must not overlap the input arrays")
