"""The one decision between the in-memory sort and the out-of-core one, and the budget it uses.

A rank's in-memory sort holds its rows about PIPELINE_COPIES times over at once (its encoded
input, the send buffers and the receive buffers) plus what its local sort engine says that sort
takes (engine.workspace_bytes). Where that exceeds any rank's budget, every rank sorts out of
core (outofcore/), whose steps each stay within the budget.
"""

from __future__ import annotations

from mpi4py import MPI

from .memory import default_budget, parse_size
from .runtime import Runtime

PIPELINE_COPIES = 3
SMALL_SORT_BYTES = 32 << 20  # an in-memory need this small sorts in memory unless a budget is
# named: the free memory is not asked for (on CPUs that reads /proc and the cgroup's files, two
# thirds of a small call's time), and only a nearly full device would have sent it out of core


def budget(rt: Runtime, device_memory: int | str | None) -> int:
    """device_memory (parsed by the entry point's checks: inputs.py), else the default: a share
    of the device's (or the host's) memory for each of the ranks that share it."""
    if device_memory is not None:
        return parse_size(device_memory)
    return default_budget(rt.backend.name, rt.sharers)


def in_memory_bytes(rt: Runtime, rows: int, row_bytes: int) -> int:
    """What this rank's in-memory sort of `rows` rows of row_bytes bytes needs at its peak."""
    return PIPELINE_COPIES * rows * row_bytes + rt.backend.engine.workspace_bytes(rows, row_bytes)


def over_budget(rt: Runtime, need: int, mine: int | None) -> bool:
    """Would any rank's in-memory sort exceed its budget (need: its in_memory_bytes; mine: its
    budget, None where its sort is too small to ask)? Then every rank sorts out of core.
    Collective: every rank gets the same answer."""
    over = mine is not None and need > mine
    return rt.comm.allreduce(over, op=MPI.LOR) if rt.comm.Get_size() > 1 else over


def out_of_core(rt: Runtime, rows: int, row_bytes: int, device_memory: int | str | None
                ) -> int | None:
    """This rank's budget where the sort goes out of core (over_budget), else None.
    Collective: every rank gets the same answer."""
    need = in_memory_bytes(rt, rows, row_bytes)
    small = device_memory is None and need <= SMALL_SORT_BYTES
    mine = None if small else budget(rt, device_memory)
    if not over_budget(rt, need, mine):
        return None
    return budget(rt, device_memory) if mine is None else mine
