"""Running out of device memory must never give a wrong result.

Two guards: the GPU backend refuses CuPy versions whose sorts can silently return wrong results
when device memory runs out (CuPy up to 13.6: thrust's workspace allocation failed without an
error, https://github.com/cupy/cupy/issues/9894), and an out-of-memory error is turned into one
message that says what to do (`out_of_memory_message`), which the CLI prints before it ends the
job on every rank; where a step has no collective inside, an OOM in it becomes a DistsortError
(`oom_as_error`) that errors.agree makes every rank's: the job fails alike everywhere, no rank
waits, and a service goes on to its next job.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from .errors import DistsortError

T = TypeVar("T")

UNSAFE_THROUGH = (13, 6)  # the last CuPy minor version whose sorts can go wrong on OOM
CUPY_ISSUE = "https://github.com/cupy/cupy/issues/9894"


def cupy_version() -> str:
    """The installed CuPy's version string."""
    import cupy

    return cupy.__version__


def version_tuple(version: str) -> tuple[int, int]:
    """(major, minor) of a version string like "13.6.0", "14.0.0rc1" or "12.3"."""
    match = re.match(r"\s*v?(\d+)(?:\.(\d+))?", version)
    if not match:
        raise ValueError(f"not a version: {version!r}")
    return int(match.group(1)), int(match.group(2) or 0)


def unsafe_cupy(version: str) -> bool:
    """True for CuPy versions whose sorts can return wrong results when memory runs out."""
    try:
        return version_tuple(version) <= UNSAFE_THROUGH
    except ValueError:
        return True  # unknown: assume the worst


def require_safe_cupy(version: str | None = None) -> None:
    """Raise DistsortError if the GPU backend must not run with this CuPy (default: installed)."""
    version = cupy_version() if version is None else version
    if unsafe_cupy(version):
        raise DistsortError(
            f"CuPy {version} can return wrongly sorted data when GPU memory runs out "
            f"({CUPY_ISSUE}), so the GPU backend refuses CuPy 13.6 and older: "
            "pip install -U 'cupy-cuda13x>=14' (or cupy-cuda12x), or use --backend cpu"
        )


def is_out_of_memory(exc: BaseException) -> bool:
    """CuPy's OutOfMemoryError, a CUDA allocation failure, or MemoryError (host, or thrust's
    workspace in the CuPy versions that report it)."""
    if isinstance(exc, MemoryError):
        return True
    name, module = type(exc).__name__, type(exc).__module__ or ""
    if name == "OutOfMemoryError" and module.startswith("cupy"):
        return True
    return name == "CUDARuntimeError" and "cudaErrorMemoryAllocation" in str(exc)


def out_of_memory_message(rank: int, exc: BaseException) -> str | None:
    """The one-line message for an out-of-memory error on `rank`, or None if exc is not one."""
    if not is_out_of_memory(exc):
        return None
    where = "" if type(exc) is MemoryError else "GPU "  # MemoryError: host, or thrust's workspace
    detail = f" ({exc})" if str(exc) else ""
    return (f"rank {rank} ran out of {where}memory{detail}; nothing was written. Give each rank "
            "a smaller --device-memory (e.g. 4GiB) so that the sort runs out of core within it, "
            "or use more ranks")


def oom_as_error(rank: int, step: Callable[[], T]) -> Callable[[], T]:
    """step, with an out-of-memory error turned into a DistsortError with its message, for
    errors.agree: only around a step with no collective inside (a rank that ran out there
    leaves no other rank waiting in one)."""
    def run() -> T:
        try:
            return step()
        except Exception as exc:
            message = out_of_memory_message(rank, exc)
            if message is None:
                raise
        raise DistsortError(message)  # here, not in the handler: the step's frames and memory go

    return run
