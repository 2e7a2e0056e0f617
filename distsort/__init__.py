"""distsort: a distributed multi-GPU sample sort (MPI ranks, NCCL or MPI exchange, CuPy or NumPy).

    from mpi4py import MPI
    import distsort
    shard = distsort.sort(local_keys)          # this rank's piece of the global sorted order
"""
# ruff: noqa: E402  (the command line's settings must be set before api imports NumPy and mpi4py)

import os as _os
import sys as _sys

from . import binding as _binding

#: The Open MPI and BLAS settings this process set itself (`info` tells them from the user's),
#: before api imports NumPy and starts MPI: only where it runs the command line (launch/README.md).
_COMMAND_LINE = _binding.runs_command_line(_sys.orig_argv)
DEFAULTS_SET = _binding.command_line_defaults(_os.environ) if _COMMAND_LINE else {}
_os.environ.update(DEFAULTS_SET)
if _COMMAND_LINE:  # the GPU's start beside the imports below (gpu_start.py)
    from . import gpu_start as _gpu_start

    _gpu_start.start(_os.environ, _sys.orig_argv)

from .api import argsort, sort, sort_pairs, sort_records
from .errors import DistsortError
from .outofcore.layout import shard_capacity
from .runtime import bind_gpu, release

__all__ = ["Client", "DistsortError", "argsort", "bind_gpu", "release", "shard_capacity", "sort",
           "sort_pairs", "sort_records"]
__version__ = "0.1.0"


def __getattr__(name: str):
    """distsort.Client, imported when first asked for: a job needs no socket module."""
    if name == "Client":
        from .service.client import Client

        return Client
    raise AttributeError(f"module 'distsort' has no attribute {name!r}")
