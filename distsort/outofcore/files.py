"""`sort INPUT -o OUTPUT` when a rank's sort does not fit its device memory budget.

Each rank reads its range of the input piece by piece (one run at a time) straight into the
out-of-core sort (sort.py) and writes its shard of the output, piece by piece, at its
offset of the output file (ShardWriter: temporary name, renamed when every rank is done), each
round's behind the next round's sort (writes.py).
Neither the whole input nor the whole output is ever in host memory: only the sorted runs (one
copy of the rank's range) and one exchange round's buffers. --verify checks the pieces on the
device as they go by (count, order, order-independent checksum; values by checksum), as
check.verify does.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..check import Summary, checksum, combine
from ..errors import DistsortError, agree
from ..io import FileFormat, InputFile, rank_range
from ..io.staging import load
from ..payload import restored
from ..phases import phase
from ..report import HostClock, SortReport
from ..runtime import Runtime
from .sort import external_sort
from .sources import numeric_source, positions_source, records_source
from .writes import WritesBehind


def sort_file(rt: Runtime, args, fmt: FileFormat, source: InputFile, values: InputFile | None,
              writers: list, budget: int, report: SortReport) -> None:
    """Sort the file out of core, within `budget` bytes of device memory per rank.

    writers: ShardWriters of the output and, with values, of the values output (the caller
    made them, and aborts them on failure). Collective.
    """
    comm = rt.comm
    start, stop = rank_range(source.count, comm.Get_rank(), comm.Get_size())
    report.ran_on(rt)
    stand = fmt.stand_ins(args.descending)
    order = stand.sort_descending if stand else args.descending
    check = StreamCheck(order, fmt.key_size) if args.verify else None
    like = None if values is None else np.empty(0, values.fmt.native_dtype)  # 1-D or uint8 rows

    def write(row: int, columns: list) -> None:  # host columns, on the writes' thread
        if values is not None:  # back to the values' dtype where they travelled as bytes
            columns = [columns[0], restored(columns[1], like)]
        for writer, column in zip(writers, columns):
            writer.write(row, column)

    def put(row: int, columns: list) -> None:  # a round's columns, on the device
        if check:  # the bytes as they travelled: the checksum reads bytes alike
            check.wrote(columns, rt.xp)
        if stand and not args.argsort:  # the keys' bits from their stand-ins
            columns = [stand.bits(columns[0])] + columns[1:]
        behind.put(row, columns)

    with phase(report, "write", HostClock()):  # its thread (and the module of threads)
        behind = WritesBehind(rt, write)
    try:
        piecewise = file_source(rt, args, fmt, source, values, start, stop, check, stand)
        external_sort(rt, piecewise, budget, report, write=put)
        with phase(report, "write", HostClock()):  # what the rounds did not hide
            agree(comm, behind.finish)
        if check:
            with phase(report, "verify", HostClock()):  # the pieces' verdicts combined
                check.conclude(comm)
        with phase(report, "write", HostClock()):  # every rank's files published
            for writer in writers:
                writer.commit()
    finally:
        behind.stop()  # before the caller aborts the files it writes into


def file_source(rt, args, fmt: FileFormat, source: InputFile, values: InputFile | None,
                start: int, stop: int, check, stand=None):
    """The external.Source of this rank's range [start, stop) of the input (and values);
    stand: the keys' StandIns (bool, datetime64, timedelta64 keys), read as their stand-ins."""
    def read(lo: int, hi: int) -> list:  # on the device: through pinned buffers, no host copy
        files = [source] if values is None else [source, values]
        columns = [load(f, start + lo, start + hi, rt.xp) for f in files]
        return [stand.encode(columns[0])] + columns[1:] if stand else columns

    count = stop - start
    dtype, order = (stand.code_dtype, stand.sort_descending) if stand else (fmt.native_dtype,
                                                                            args.descending)
    if fmt.kind == "records":
        made = records_source(rt, count, read, fmt.key_size, args.descending)
    elif args.argsort:
        made = positions_source(rt, count, read, start, dtype, order)
    else:
        made = numeric_source(rt, count, read, dtype, order, args.stable)
    if not check:
        return made

    def encode(columns: list) -> list:  # each input row comes by here once, on the device
        check.read(columns, rt.xp)
        return made.encode(columns)

    return replace(made, encode=encode)


class StreamCheck:
    """check.verify fed piece by piece: input pieces as they are sorted into runs, output pieces
    as they are written."""

    def __init__(self, descending: bool, key_size: int | None):
        self.summary = Summary()
        self.descending, self.key_size = descending, key_size
        self.values_in = self.values_out = 0

    def read(self, columns: list, xp) -> None:
        self.summary.add_input(columns[0], xp)
        if len(columns) > 1:
            self.values_in += checksum(columns[1], xp)

    def wrote(self, columns: list, xp) -> None:
        self.summary.add_output(columns[0], xp, self.descending, self.key_size)
        if len(columns) > 1:
            self.values_out += checksum(columns[1], xp)

    def conclude(self, comm) -> None:
        """Raise on every rank (agreed) unless the output is the input sorted."""
        verdict = combine(comm, self.summary)
        values_in, values_out = comm.allreduce(self.values_in), comm.allreduce(self.values_out)
        problem = None if verdict.ok else verdict.message
        if problem is None and values_in % 2**64 != values_out % 2**64:
            problem = "the values are not a permutation of the input values"
        if problem:
            def fail():
                raise DistsortError(f"--verify failed, nothing written: {problem}")

            agree(comm, fail)
