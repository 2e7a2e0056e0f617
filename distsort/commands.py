"""What each command does (the CLI in cli.py only parses). Every function is collective."""

from __future__ import annotations

import contextlib
import json
import os
import time

import numpy as np
from mpi4py import MPI

from . import api, plan, progress, stability
from .check import input_summary, run_argsort_check, run_check, verify
from .errors import DistsortError, agree
from .io import FileFormat, ShardWriter, detect_format, open_input, output_format, rank_range
from .io.formats import is_npy, parse_dtype
from .io.staging import load
from .io.writer import ensure_replaceable, same_file, temp_beside, writable
from .keys import stand_ins
from .node import node_place
from .outofcore import files as outofcore_files
from .payload import restored, stored
from .phases import phase
from .report import HostClock, SortReport, duration, rate, scaled, since_start, summarize
from .runtime import array_module, get_runtime
from .workers import threads_for, use_threads

DEFAULT_PER_RANK = {"gpu": 2**28, "cpu": 2**22}


def run_job(args, comm) -> int:
    """The default job: generate keys on every rank, sort them, verify, print a summary."""
    from .gen import generate

    agree(comm, lambda: writable(args.report))
    rt = agree(comm, lambda: get_runtime(comm, args.backend))
    dtype = agree(comm, lambda: parse_dtype(args.dtype))
    count = args.count if args.count is not None else DEFAULT_PER_RANK[rt.backend.name] * comm.size
    start, stop = rank_range(count, comm.Get_rank(), comm.Get_size())
    def data(seed: int):
        return agree(comm, lambda: generate(args.dist, dtype, start, stop, seed, rt.xp, count))

    api.sort(data(args.seed + 1), comm, backend=rt.backend.name)  # warm-up: kernels loaded
    keys = data(args.seed)
    report = SortReport()
    shard = api.sort(keys, comm, backend=rt.backend.name, report=report)
    stand = stand_ins(dtype, descending=False)  # bool and time keys: checked as the file job's
    verdict = verify(comm, *((stand.encode(a) if stand else a) for a in (keys, shard)), xp=rt.xp)
    summary = summarize(comm.allgather(report.as_dict()), count)
    _publish_report(args.report, comm, summary)
    if comm.Get_rank() == 0 and not args.quiet:
        what = f"{count} {dtype} keys ({args.dist})"
        print(describe(summary, what, report) + f"\n  check: {verdict.message}", flush=True)
    return 0 if verdict.ok else 1


def describe(summary: dict, what: str, report: SortReport) -> str:
    """A short human summary of a sort: its time (the whole command's, where the CLI timed it)
    and throughput (of bytes too, and the reads' and writes', for a file job: file_facts), the
    path, backend, engine and transport, and the slowest rank's phases."""
    seconds, phases, ranks = summary["seconds"], summary["phases"], summary["ranks"]
    rates = [rate(summary["keys"], seconds, "keys")]
    if summary.get("bytes"):
        rates.append(rate(summary["bytes"], seconds, "B"))
    for step in ("read", "write"):
        if summary.get(f"{step}_bytes_per_s"):
            rates.append(f"{step} {rate(summary[f'{step}_bytes_per_s'], 1.0, 'B')}")
    how = ", ".join(x for x in (report.backend, f"engine {summary['engine']}", summary["path"],
                                summary["transport"] and f"transport {summary['transport']}")
                    if x)
    listed = "  ".join(f"{k} {duration(v)}" for k, v in phases.items() if v)
    return (
        f"distsort: sorted {what} on {ranks} rank{'s' * (ranks != 1)} ({how})\n"
        f"  time {duration(seconds)} ({', '.join(rates)}), largest shard "
        f"{summary['max_shard_over_mean']:.4f} x n/p, peak host memory "
        f"{scaled(summary['peak_host_bytes'], 'B')} a rank\n"
        f"  phases (slowest rank): {listed}"
    )


def sort_file(args, comm) -> int:
    """`sort INPUT -o OUTPUT`: each rank reads its range, sorts, writes its range of OUTPUT.

    In memory, a rank's range goes from the file straight to its device and its shard from the
    device straight to the output (io/staging.py); larger ranges go out of core
    (outofcore/files.py)."""
    started = since_start() if args.launched is None else args.launched
    began = time.perf_counter()
    report = SortReport(rank=comm.Get_rank())  # the phases before the sort's know their rank
    report.timed["start"] = started  # the launch, imports and MPI start-up
    writers = []
    try:
        with phase(report, "init", HostClock()):  # the device, the kernels, the files' layouts
            rt = agree(comm, lambda: get_runtime(comm, args.backend or "auto"))
            fmt = agree(comm, lambda: _input_format(args))
            source = agree(comm, lambda: open_input(args.input, fmt))
            out_fmt = agree(comm, lambda: _output_format(args, fmt))
            values = agree(comm, lambda: _open_values(args, source.count))
            paths = agree(comm, lambda: _output_paths(args, out_fmt, values))
            agree(comm, lambda: writable(args.report, others=(args.input, args.values)
                                         + tuple(path for path, _ in paths)))
            budget = agree(comm, lambda: plan.budget(rt, args.device_memory))
            for path, fmt_out in paths:  # made now: their pages come in while the job reads
                writers.append(ShardWriter(path, fmt_out, source.count, comm, args.durable,
                                           ahead=rt.backend.name == "gpu"))
        _sort_to(args, comm, rt, (fmt, source, values), writers, report, budget)
    finally:
        for writer in writers:
            writer.abort()
    report.wall = started + time.perf_counter() - began
    summary = summarize(comm.allgather(report.as_dict()), source.count)
    summary.update(file_facts(summary, args.input, source.count * _read_row(fmt, values),
                              paths))
    _publish_report(args.report, comm, summary)
    if comm.Get_rank() == 0 and not args.quiet:
        written = ", ".join(f"{f['path']} ({f['format']})" for f in summary["files"])
        print(describe(summary, f"{source.count} {fmt.describe()} from {args.input}", report)
              + f"\n  wrote {written}" + ("  (verified)" if args.verify else ""), flush=True)
    return 0


def _sort_to(args, comm, rt, inputs: tuple, writers: list, report, budget: int) -> None:
    """Sort the input (format, keys file, values file or None) into the writers' files: by
    fields, out of core or in memory, as the input's kind and size ask."""
    fmt, source, values = inputs
    start, stop = rank_range(source.count, comm.Get_rank(), comm.Get_size())
    row = _read_row(fmt, values) + 8 * bool(args.argsort)
    if fmt.structured:  # the library plans its sort, within the same budget
        _sort_by_fields(args, comm, source, values, (start, stop), writers, report, budget)
        return
    if plan.over_budget(rt, plan.in_memory_bytes(rt, stop - start, row), budget):
        outofcore_files.sort_file(rt, args, fmt, source, values, writers, budget, report)
        return
    stand = fmt.stand_ins(args.descending)
    order = stand.sort_descending if stand else args.descending
    with phase(report, "read", HostClock()):
        local = agree(comm, lambda: _read(comm, source, start, stop, rt.xp, "read"))
        local_values = agree(comm, lambda: _read(comm, values, start, stop, rt.xp,
                                                 "values read")) if values else None
    if stand:  # bool, datetime64, timedelta64: sorted and checked as their stand-ins
        with phase(report, "encode", rt.backend.clock()):
            local = stand.encode(local)
    if args.verify:  # the input's part first: the sort may then use the read arrays
        with phase(report, "verify", HostClock(rt.backend.synchronize)):
            before = input_summary(local, rt.xp, local_values)
    outputs = _sort_local(args, fmt, local, local_values, comm, report, budget, order)
    if args.verify:
        with phase(report, "verify", HostClock(rt.backend.synchronize)):
            _verify(comm, before, outputs, rt.xp, order, fmt.key_size)
    if stand and not args.argsort:
        with phase(report, "decode", rt.backend.clock()):
            outputs[0] = stand.bits(outputs[0])
    del local, local_values
    with phase(report, "write", HostClock()):
        _write(comm, writers, outputs)


def _read_row(fmt: FileFormat, values) -> int:
    """Bytes a row of the input: its key's and its value's (values: InputFile or None)."""
    return fmt.itemsize + (values.fmt.itemsize if values else 0)


def file_facts(summary: dict, input_path: str, nbytes: int, paths: list) -> dict:
    """What a file job adds to its summary (and --report): the input, the bytes read (keys and
    values), the files written with their formats, and the read and write rates (bytes/s)
    where those phases hold the whole read and write (in memory; out of core the reads run
    inside the partition and the writes inside the finish, so no rate is given: None)."""
    whole = summary["path"] == "in memory"
    written = summary["keys"] * sum(fmt.itemsize for _, fmt in paths)
    moved = {"read": nbytes, "write": written}
    took = {step: summary["phases"].get(step) for step in moved}
    return {"input": input_path, "bytes": nbytes,
            "files": [{"path": path, "format": fmt.describe()} for path, fmt in paths],
            **{f"{step}_bytes_per_s": moved[step] / took[step] if whole and took[step] else None
               for step in moved}}


def _sort_by_fields(args, comm, source, values, span: tuple, writers: list, report,
                    budget: int) -> None:
    """A structured .npy, sorted by its fields (--order first) in host memory: each rank's rows
    go to the library (api.sort, argsort or sort_pairs with order=), which sorts them as byte
    records behind their fields' key, out of core where they do not fit the device."""
    common = dict(comm=comm, descending=args.descending, backend=args.backend or "auto",
                  report=report, device_memory=budget, order=args.order)
    with phase(report, "read", HostClock()):  # as stored (payload.py): viewed back as read
        local = restored(agree(comm, lambda: _read(comm, source, *span, np, "read")),
                         source.fmt.empty_like())
        local_values = restored(agree(comm, lambda: _read(comm, values, *span, np,
                                                          "values read")),
                                values.fmt.empty_like()) if values else None
    if args.argsort:
        outputs = [api.argsort(local, **common)]
    elif local_values is not None:
        outputs = list(api.sort_pairs(local, local_values, **common))
    else:
        outputs = [api.sort(local, **common)]
    if args.verify:
        with phase(report, "verify", HostClock()):  # the rows' bytes hashed, their order by
            # their fields' keys (check.key_words)
            _verify(comm, input_summary(local, np, local_values), outputs, np, args.descending,
                    None, args.order)
    with phase(report, "write", HostClock()):  # in the form the writers take (payload.py)
        _write(comm, writers, [stored(o) for o in outputs])


def _read(comm, source, start: int, stop: int, xp, what: str):
    """This rank's range of an input file on xp's device, with a progress bar. CPU ranks only
    read theirs (the partition copies what it sends; one rank's sort groups its keys into key
    ranges in new memory, the copy a sort that may not overwrite makes anyway): the file's
    pages, mapped, spare them a copy into new memory (bench/RESULTS.md, sessions 48 and 53)."""
    with progress.Bar(comm, what, (stop - start) * source.fmt.itemsize) as bar:
        return load(source, start, stop, xp, bar.add, mapped=True)


def _input_format(args) -> FileFormat:
    if args.argsort and args.record_size:
        raise DistsortError("--argsort works on numeric keys, not on --record-size records")
    if args.values and args.record_size:
        raise DistsortError("records carry their own payload: drop --values with --record-size")
    if args.argsort and args.values:
        raise DistsortError("--argsort writes positions only: leave out --values")
    if args.argsort and args.verify:
        raise DistsortError("--verify checks sorted keys, not an --argsort output: check the "
                            "positions after with `distsort check INPUT OUTPUT --argsort`")
    fmt = detect_format(args.input, args.dtype, args.record_size, args.key_size)
    if args.order and not fmt.structured:
        raise DistsortError(f"--order names fields: {args.input} is not a structured .npy")
    return fmt


def _values_options_alone(args, names: tuple) -> None:
    """DistsortError where options about values files are given without --values: they would
    do nothing."""
    given = [f"--{name.replace('_', '-')}" for name in names if getattr(args, name)]
    if given and not args.values:
        verb = "is" if len(given) == 1 else "are"
        raise DistsortError(f"{' '.join(given)} {verb} for values files: give them with --values")


def _output_format(args, fmt: FileFormat) -> FileFormat:
    like = FileFormat.raw(np.int64) if args.argsort else fmt
    return output_format(args.output, like=like)


def _open_values(args, count: int):
    _values_options_alone(args, ("values_dtype", "values_record_size", "values_output"))
    if not args.values:
        return None
    fmt = detect_format(args.values, args.values_dtype, args.values_record_size, payload=True)
    values = open_input(args.values, fmt)
    if values.count != count:
        raise DistsortError(
            f"{args.values} holds {values.count} values but {args.input} holds {count} keys: "
            "a values file needs exactly one value per key"
        )
    return values


def _sort_local(args, fmt: FileFormat, local, local_values, comm, report, budget: int,
                descending: bool) -> list:
    """Sort this rank's piece; returns [keys or records or positions] (+ [values]). The
    library plans with the file's budget and formula (plan.py): it sorts in memory too."""
    common = dict(comm=comm, descending=descending, backend=args.backend or "auto",
                  report=report, device_memory=budget)
    if fmt.kind == "records":
        return [api.sort_records(local, fmt.key_size, **common)]
    if args.argsort:
        return [api.argsort(local, **common)]
    # the read arrays are the job's own, unless they are the file's pages (staging.load)
    mine = all(getattr(a.flags, "writeable", True) for a in (local, local_values)
               if a is not None)
    if local_values is not None:
        return list(api.sort_pairs(local, local_values, stable=args.stable,
                                   overwrite_input=mine, **common))
    return [api.sort(local, stable=args.stable, overwrite_input=mine, **common)]


def _verify(comm, before, outputs, xp, descending: bool, key_size, order=None) -> None:
    """--verify: outputs[0] is the input sorted (and outputs[1] its values with it; before:
    the input's check.input_summary; order: a structured input's --order), else one message
    and every rank raises: nothing is written."""
    values_out = outputs[1] if len(outputs) > 1 else None
    verdict = verify(comm, before, outputs[0], descending=descending, key_size=key_size, xp=xp,
                     values_out=values_out, order=order)
    if not verdict.ok:
        def fail():
            raise DistsortError(f"--verify failed, nothing written: {verdict.message}")

        agree(comm, fail)


def _output_paths(args, out_fmt: FileFormat, values) -> list:
    """(path, format) of the output, and of the values output if there are values; each a
    file of its own, and none an input (by the files they name, not by their spelling:
    ./in.npy, a link to it)."""
    paths = [(args.output, out_fmt)]
    if values is not None:
        target = args.values_output or _values_path(args.output, values.fmt)
        paths.append((target, output_format(target, like=values.fmt)))
    inputs = [args.input] + ([args.values] if values is not None else [])
    for path, _ in paths:
        ensure_replaceable(path)  # now, not after the sort
        given = next((i for i in inputs if same_file(path, i)), None)
        if given is not None:
            raise DistsortError(f"the output {path} is the input {given}: choose another "
                                "output name")
    if len(paths) == 2 and same_file(paths[0][0], paths[1][0]):
        raise DistsortError(f"the keys and the values would both be written to {paths[0][0]}: "
                            "give --values-output another name")
    return paths


def _write(comm, writers: list, outputs) -> None:
    """Write every output (its writer's file, under a temporary name, made before); publish
    them only when all are written. The caller aborts the writers on failure."""
    start = comm.exscan(len(outputs[0])) or 0
    for writer, data in zip(writers, outputs):
        with progress.Bar(comm, f"write {os.path.basename(writer.path)}", data.nbytes) as bar:
            writer.write(start, data, bar.add)
    for writer in writers:
        writer.commit()


def _values_path(output: str, fmt: FileFormat) -> str:
    """OUT.values.EXT beside OUT.EXT; records of values are raw bytes: never .npy."""
    stem, ext = os.path.splitext(output)
    if fmt.kind == "records" and ext.lower() == ".npy":
        ext = ".bin"
    return f"{stem}.values{ext}"


def gen_file(args, comm) -> int:
    """`gen OUTPUT`: every rank generates and writes its own range of the data set."""
    from .gen import gen_file as generate_file
    from .gen import gen_format

    records = args.dist == "gensort" or args.record_size is not None or args.key_size is not None
    dtype = args.dtype or (None if records else "uint32")
    fmt = agree(comm, lambda: gen_format(args.output, args.dist, dtype, args.record_size,
                                         args.key_size))
    with phase(SortReport(rank=comm.Get_rank()), "gen", HostClock()):  # watched: no hang
        generate_file(comm, args.output, args.count, fmt, args.dist, args.seed)
    if comm.Get_rank() == 0 and not args.quiet:
        print(f"distsort: wrote {args.count} {fmt.describe()} ({args.dist}) to {args.output}")
    return 0


def check(args, comm) -> int:
    """`check INPUT OUTPUT`: is OUTPUT the sorted INPUT (order, count, checksum)?"""
    fmt = None
    if args.dtype or args.record_size:
        fmt = agree(comm, lambda: detect_format(args.input, args.dtype, args.record_size,
                                                args.key_size))
    if args.argsort and (args.values or args.record_size):
        agree(comm, _argsort_checks_keys)
    if args.stable and not args.values:
        agree(comm, _stable_needs_values)
    agree(comm, lambda: _values_options_alone(args, ("values_dtype", "values_record_size")))
    agree(comm, lambda: _fields_options(args))
    values_format = (args.values_dtype, args.values_record_size)  # raw values files' format
    xp = agree(comm, lambda: array_module(comm, args.backend))  # a GPU where every rank has one
    use_threads(threads_for(node_place(comm)[1]))
    with phase(SortReport(rank=comm.Get_rank()), "check", HostClock()):  # watched
        if args.argsort:
            verdict = run_argsort_check(comm, args.input, args.output, fmt,
                                        descending=args.descending, order=args.order)
        else:
            verdict = run_check(comm, args.input, args.output, fmt, descending=args.descending,
                                xp=xp, values=args.values, values_format=values_format,
                                order=args.order)
        ok, message = verdict.ok, verdict.message
        if ok and args.stable:
            ok, stable = stability.check_files(comm, args.input, args.output, fmt, args.values,
                                               values_format)
            sorted_ok = verdict.message.removeprefix("OK: ")
            message = f"{verdict.message}; {stable}" if ok else f"{stable} (otherwise {sorted_ok})"
    if comm.Get_rank() == 0:
        print(f"distsort check: {message}", flush=True)
    return 0 if ok else 1


def _fields_options(args) -> None:
    """--order names fields of a structured .npy; --stable checks numeric keys (rows that sort
    by their fields always sort stably)."""
    fmt = detect_format(args.input) if is_npy(args.input) else None
    by_fields = fmt is not None and fmt.structured
    if args.order and not (by_fields and fmt.dtype.names):
        raise DistsortError(f"--order names fields: {args.input} is not a structured .npy")
    if args.stable and by_fields:
        raise DistsortError(f"--stable checks numeric keys with their values; {args.input} "
                            "holds rows that sort by their fields, which always sort stably")


def _stable_needs_values() -> None:
    raise DistsortError("--stable checks the values of equal keys: give --values IN_VALUES "
                        "OUT_VALUES (an --argsort output is checked for stability without it)")


def _argsort_checks_keys() -> None:
    raise DistsortError("--argsort checks the positions of numeric keys: leave out --values "
                        "and --record-size")


def compile_kernels(args, comm) -> int:
    """`compile`: ahead of the jobs, what they would otherwise compile as they run: the Python
    bytecode of distsort and the packages a job imports (bytecode.py), the CPU's C kernels
    (local/clib.py) with their calibration (lsd.measure_all), once a node; then on GPUs every
    CUDA kernel a sort may use into the kernel cache (cuda_source.py): ours, and CuPy's own
    that small sorts of every kind compile: a rank's alone and, where compile runs on several
    ranks, theirs together, split and (on one GPU) folded (steps/fold.py). Those of several
    ranks differ (the steps, the transport): at one rank a note says how to compile them."""
    from .backend import gpu_count

    began = time.perf_counter()
    unwritten = comm.allreduce(agree(comm, lambda: _compile_host(node_place(comm)[0] == 0)))
    if comm.Get_rank() == 0 and unwritten:
        print(f"distsort: {unwritten} package folder(s) could not take all of their Python "
              "bytecode (read-only?): jobs compile those modules as they import them", flush=True)
    if not comm.allreduce(gpu_count() > 0, op=MPI.LAND):
        if comm.Get_rank() == 0:
            print(f"distsort: Python's bytecode and the C kernels are compiled, their sorts "
                  f"timed against NumPy's ({time.perf_counter() - began:.1f} s); no GPU on "
                  "every rank: no CUDA kernels to compile", flush=True)
        return 0
    return _compile_cuda(comm)


def _compile_host(first_on_node: bool) -> int:
    """The bytecode of the packages a job imports (where their folders can be written: the
    number of those that could not), the C kernels and the answers of their calibration
    (lsd.wins), by the first rank of each node."""
    from . import bytecode
    from .local import clib, lsd

    if not first_on_node:
        return 0
    unwritten = bytecode.compile_packages()
    lsd.measure_all()  # the C kernels built first, then which sorts win on this CPU
    clib.watcher()  # the output guard's watcher program (io/watch.c)
    return unwritten


def _compile_cuda(comm) -> int:
    """compile_kernels' CUDA kernels (see there)."""
    from . import check as check_module
    from . import keys
    from .cuda_source import compile_apart, kernel_cache, remember_fingerprints, use_kernel_cache
    from .local import digit_partition, partition, radix, rows, tiles
    from .steps import sample
    from .transport.choice import FOLD, SPLIT

    use_kernel_cache(fill=True)  # first: building a runtime of several ranks runs kernels
    rt = agree(comm, lambda: get_runtime(comm, "gpu"))  # built for this GPU's architecture
    start = time.perf_counter()
    modules = (radix, digit_partition, check_module, keys, sample, partition, rows, tiles)
    compile_apart([module.compile_all for module in modules])
    # alone on the GPU comm bound (on COMM_SELF a rank would take GPU 0 where no launcher names
    # its local rank), its failure every rank's (the others would wait in the next round)
    with _environment("DISTSORT_DEVICE", str(rt.xp.cuda.Device().id)):
        agree(comm, lambda: _warm_up(MPI.COMM_SELF))
    sharings = [SPLIT] if comm.Get_size() > 1 else []
    if rt.placement.one_gpu:  # ranks fold only where they all share one GPU (steps/fold.py):
        sharings.append(FOLD)  # elsewhere the folded round would be the split one again
    for sharing in sharings:
        with _environment("DISTSORT_SHARED_GPU", sharing):
            _warm_up(comm)
    for turn in range(comm.Get_size()):  # every rank's option sets, merged into the file in
        agree(comm, remember_fingerprints if turn == comm.Get_rank() else lambda: None)  # turn
    seconds = comm.allreduce(time.perf_counter() - start, op=MPI.MAX)
    if comm.Get_rank() == 0:
        print(f"distsort: the CUDA kernels are compiled in {kernel_cache()} ({seconds:.1f} s)")
        if comm.Get_size() == 1:
            print("distsort: those of jobs on several ranks were not: run `mpirun -n 2 python -m "
                  "distsort compile` (or your launcher) for them", flush=True)
    return 0


@contextlib.contextmanager
def _environment(name: str, value: str):
    """$name set to value within (every rank alike), then as it was."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def _warm_up(comm) -> None:
    """Sorts of every kind and dtype on comm's ranks, so that CuPy compiles the kernels of its
    own that they use."""
    xp = get_runtime(comm, "gpu").xp
    for dtype in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                  "float16", "float32", "float64"):
        _warm_up_dtype(comm, xp, np.dtype(dtype))
    records = (xp.arange(16 << 16) % 251).astype(np.uint8).reshape(-1, 16)
    api.sort_records(records, 10, comm)


def _warm_up_dtype(comm, xp, dtype: np.dtype) -> None:
    """Sorts of every kind for keys of this dtype, small (CUB) and past our radix engine's
    smallest size, distinct and with ties (the splitters' tie-break at several ranks)."""
    from .local.radix import MIN_N

    sizes = [1 << 16] + ([MIN_N["sort" if dtype.itemsize == 4 else "sort64"] + 1]
                         if dtype.itemsize in (4, 8) else [])
    for n in sizes:
        for keys in (xp.arange(n, 0, -1).astype(dtype), (xp.arange(n) % 7).astype(dtype)):
            for options in ({}, {"stable": True}, {"descending": True}):
                out = api.sort(keys, comm, **options)
                verify(comm, keys, out, descending=options.get("descending", False), xp=xp)
            api.argsort(keys, comm)
            for values in (xp.arange(n, dtype=np.uint32), xp.arange(n, dtype=np.int64)):
                out, values_out = api.sort_pairs(keys, values, comm)
                verify(comm, keys, out, xp=xp, values_in=values, values_out=values_out)
            api.sort(keys.get()[:4096], comm, backend="gpu", device_memory="16KiB")  # out of core


def info(args, comm) -> int:
    """`info`: backend, GPUs, MPI library, NCCL version."""
    from .info import collect_info, format_info

    details = collect_info(comm)
    if comm.Get_rank() == 0:
        print(json.dumps(details, indent=1, default=str) if args.json else format_info(details))
    return 0


def bench(args, comm) -> int:
    """`bench`: throughput against size and per-rank phases, as a table, JSON and PNG."""
    from .bench import run_bench

    return run_bench(args, comm)


def _publish_report(path: str | None, comm, summary: dict) -> None:
    """Rank 0 writes the combined report as JSON, under a temporary name renamed to the report
    once whole (a full disk leaves neither a cut report nor a cut former one); a failure is
    agreed across ranks, and says which outputs, published before it, stand."""
    def write():
        if not path or comm.Get_rank() != 0:
            return
        temp = temp_beside(path)
        try:
            with os.fdopen(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "w") as f:
                json.dump(summary, f, indent=2)
            os.replace(temp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):  # not made, or made and cut short
                os.unlink(temp)
            written = ", ".join(f["path"] for f in summary.get("files", []))
            stand = f" (the job's outputs are written: {written})" if written else ""
            raise DistsortError(f"cannot write the report {path}: {exc.strerror}{stand}") from exc

    agree(comm, write)
