"""distsort: a distributed multi-GPU sample sort (MPI ranks, NCCL or MPI exchange, CuPy or NumPy).

    from mpi4py import MPI
    import distsort
    shard = distsort.sort(local_keys)          # this rank's piece of the global sorted order
"""

from .api import argsort, sort, sort_pairs, sort_records
from .errors import DistsortError
from .outofcore.layout import shard_capacity
from .runtime import bind_gpu, release
from .service.client import Client

__all__ = ["Client", "DistsortError", "argsort", "bind_gpu", "release", "shard_capacity", "sort",
           "sort_pairs", "sort_records"]
__version__ = "0.1.0"
