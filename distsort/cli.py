"""Command line: `python -m distsort [run|sort|gen|check|info|serve|submit|...]`, one process
per rank under mpirun.

Failures follow one rule: a DistsortError that went through errors.agree is printed once, by the
lowest rank that failed, and every rank exits with status 2; running out of memory is printed
as one line by the rank it happened on, which then aborts the job (status 2); anything else that
escapes on one rank is printed there and the whole job is aborted (status 1), so no rank waits
forever.
"""

from __future__ import annotations

import _thread
import argparse
import functools
import importlib
import os
import sys
import threading
import traceback

from mpi4py import MPI

from . import __version__, commands, progress, settings
from .errors import DistsortError, RemoteError, abort, agree
from .gen import DISTRIBUTIONS
from .gpu_safety import out_of_memory_message
from .memory import size_argument
from .runtime import BACKENDS

DIST_HELP = f"key distribution: {', '.join(DISTRIBUTIONS)} (default uniform)"

EXAMPLES = """examples:
  mpirun -n 4 python -m distsort                              # sort a generated data set
  mpirun -n 4 python -m distsort gen in.npy --count 100000000 --dtype float32 --dist normal
  mpirun -n 4 python -m distsort sort in.npy -o out.npy --verify
  mpirun -n 4 python -m distsort sort in.bin -o out.bin --dtype uint64 --descending
  mpirun -n 4 python -m distsort gen recs.dat --count 1000000 --dist gensort
  mpirun -n 4 python -m distsort sort recs.dat -o sorted.dat --record-size 100 --key-size 10
  mpirun -n 4 python -m distsort check in.npy out.npy
  mpirun -n 4 python -m distsort check in.npy pos.npy --argsort  # after sort --argsort
  mpirun -n 4 python -m distsort sort big.npy -o out.npy --device-memory 8GiB   # out of core
  mpirun -n 4 python -m distsort bench --count 2^30 --plot bench.png
  python -m distsort info --json
  mpirun -n 2 python -m distsort compile                      # once per machine or image (GPUs)
"""


def main(argv: list[str] | None = None) -> int:
    top = parser()
    args, extra = top.parse_known_args(argv)
    if extra:  # told by the command's own parser: its usage, not the top level's
        getattr(args, "parser", top).error(f"unrecognized arguments: {' '.join(extra)}")
    early = _before_command(sys.argv[1:] if argv is None else argv, args.command)
    if early:  # the command's defaults would replace them without a word
        known = args.parser._option_string_actions  # argparse's table of the command's options
        alien = [word for word in early if word.split("=")[0] not in known]
        if alien:
            args.parser.error(f"{' '.join(alien)}: not an option of {args.command}")
        args.parser.error(f"{' '.join(early)}: give options after the command "
                          f"(python -m distsort {args.command} ... {' '.join(early)})")
    if getattr(args, "token_file", None) and not args.tcp:  # a Unix socket is its user's alone
        args.parser.error("--token-file is for --tcp: a service's Unix socket takes no token")
    quiet, shown = getattr(args, "quiet", False), getattr(args, "progress", False)
    progress.configure(False if quiet else (True if shown else None))

    comm = MPI.COMM_WORLD
    before, sys.unraisablehook = sys.unraisablehook, functools.partial(interrupt_again,
                                                                       sys.unraisablehook)
    try:
        if getattr(args, "checks_settings", True):
            agree(comm, settings.check_environment)  # once, agreed: not each rank in its steps
        return args.func(args, comm)
    except RemoteError:
        return 2
    except DistsortError as exc:
        if getattr(exc, "agreed", False) or comm.Get_size() == 1:
            print(f"distsort: error: {exc}", file=sys.stderr, flush=True)
            return 2
        abort(comm, 2, f"distsort: error: {exc}")
    except KeyboardInterrupt:  # Ctrl-C reaches every rank: one says so
        abort(comm, 130, "distsort: interrupted" if comm.Get_rank() == 0 else None)
    except Exception as exc:
        oom = out_of_memory_message(comm.Get_rank(), exc)
        if oom:  # no other rank can be told: end the job, no rank waits, no output is left
            abort(comm, 2, f"distsort: error: {oom}")
        print(f"distsort: internal error on rank {comm.Get_rank()}:", file=sys.stderr)
        traceback.print_exc()
        abort(comm, 1)
    finally:
        sys.unraisablehook = before  # main() may be called in a process that goes on


def interrupt_again(others, unraisable) -> None:
    """sys.unraisablehook while main() runs: a Ctrl-C that came while a finalizer or a weakref
    callback ran (the end of a worker thread, say) cannot be raised there: Python would print it
    with a traceback and drop it, and the rank would go on. It is raised in the main thread
    again a moment later instead (from a timer's thread: raised from the hook, it would land in
    the hook), so the rank stops as on any other Ctrl-C. Anything else goes to `others`, the
    hook that was there before."""
    if issubclass(unraisable.exc_type, KeyboardInterrupt):
        threading.Timer(0.01, _thread.interrupt_main).start()
    else:
        others(unraisable)


def _before_command(argv: list[str], command: str | None) -> list[str]:
    """The options written before the command's name (none where no command is named)."""
    if command is None or command not in argv:
        return []
    return [word for word in argv[: argv.index(command)] if word.startswith("-")]


class _OneVoice(argparse.ArgumentParser):
    """argparse that prints usage, help and errors on rank 0 only: every rank parses the same
    words and would say the same thing (and every rank still exits with argparse's status)."""

    def print_usage(self, file=None) -> None:
        if MPI.COMM_WORLD.Get_rank() == 0:
            super().print_usage(file)

    def print_help(self, file=None) -> None:
        if MPI.COMM_WORLD.Get_rank() == 0:
            super().print_help(file)

    def exit(self, status: int = 0, message: str | None = None):
        super().exit(status, message if MPI.COMM_WORLD.Get_rank() == 0 else None)


def parser(kind: type = _OneVoice) -> argparse.ArgumentParser:
    top = kind(
        prog="distsort" if os.path.basename(sys.argv[0]) == "distsort" else "python -m distsort",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Distributed sample sort over MPI ranks (one GPU each, or CPUs).",
    )
    top.add_argument("--version", action="version", version=f"distsort {__version__}")
    sub = top.add_subparsers(dest="command")
    _run_options(top)
    def command(name: str, summary: str) -> argparse.ArgumentParser:
        examples = "\n".join(line for line in EXAMPLES.splitlines()
                              if f" distsort {name} " in line + " ")
        made = sub.add_parser(name, help=summary, description=summary,
                              epilog=f"examples:\n{examples}" if examples else None,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
        made.set_defaults(parser=made)
        return made

    _run_options(command("run", "generate, sort and validate a data set (the default)"))
    _sort_parser(command("sort", "sort a file into another file"))
    _gen_parser(command("gen", "write a generated data set to a file"))
    _check_parser(command("check", "say whether OUTPUT is INPUT sorted"))
    info = command("info", "backend, transport, GPUs, MPI and NCCL versions")
    info.add_argument("--json", action="store_true", help="print the details as JSON")
    # info shows each setting, flagging the bad ones, rather than stop at the first
    info.set_defaults(func=commands.info, checks_settings=False)
    _bench_parser(command("bench", "throughput against size, with a plot"))
    build = command("compile", "compile what a job would compile as it runs: the CUDA kernels "
                               "into distsort's kernel cache, the C kernels and the Python "
                               "bytecode (once per machine or container image)")
    build.set_defaults(func=commands.compile_kernels)
    _service_parsers(command)
    return top


class _JobWords(_OneVoice):
    """The parser of a service's jobs: wrong words are the job's error, not the service's end,
    and it prints nothing (--help would land in the output of the job running then)."""

    def error(self, message: str):
        raise DistsortError(message)

    def _print_message(self, message: str, file=None) -> None:
        pass


def parse_job(argv: list[str]) -> argparse.Namespace:
    """A service job's words parsed as the command line parses them (DistsortError if wrong)."""
    return _job_parser().parse_args(argv)


@functools.cache
def _job_parser() -> argparse.ArgumentParser:
    """Built once a process: building it takes longer than a small job's sort."""
    return parser(_JobWords)


def _service_parsers(command) -> None:
    serve = command("serve", "run jobs that clients submit, the ranks kept warm between them")
    _where(serve)
    serve.add_argument("--root", action="append", metavar="DIR", help="a folder the jobs may "
                       "read and write under (repeatable; default: the working folder)")
    serve.set_defaults(func=_service("server", "serve"), parse_job=parse_job)
    job = command("submit", "send a sort, gen or check job to a service; print what it printed")
    _where(job)
    job.add_argument("--no-wait", action="store_true", help="return once the job is queued")
    job.add_argument("job", nargs=argparse.REMAINDER, help="the command line, e.g. sort IN -o OUT")
    job.set_defaults(func=_service("client", "submit"))
    for name, summary in (("status", "a service's running job, queue and last jobs"),
                          ("jobs", "a service's jobs, a line each: finished, running, queued"),
                          ("shutdown", "stop a service once its running job is done")):
        made = command(name, summary)
        _where(made)
        made.set_defaults(func=_service("client", name))
    cancel = command("cancel", "cancel a queued job, or stop the running one at its next phase")
    _where(cancel)
    cancel.add_argument("job", type=int, help="the job's number (submit and status show it)")
    cancel.set_defaults(func=_service("client", "cancel"))


def _service(module: str, name: str):
    """The function `name` of service.client or service.server, imported when a command calls
    it: other commands import neither (their sockets: 5-8 ms of every rank's start)."""
    def run(*args, **kwargs):
        return getattr(importlib.import_module(f".service.{module}", __package__), name)(
            *args, **kwargs)

    return run


def _where(p: argparse.ArgumentParser) -> None:
    """Where a service listens: its Unix socket, or a TCP address and the token's file (one
    of the two: given both, one would be dropped without a word)."""
    where = p.add_mutually_exclusive_group()
    where.add_argument("--socket", metavar="PATH", help="the service's Unix socket (default: "
                       "$XDG_RUNTIME_DIR/distsort-UID.sock, else in the temporary folder)")
    where.add_argument("--tcp", metavar="HOST:PORT", help="TCP instead of the Unix socket (port "
                       "0 for serve: any free one, which it prints); every request carries the "
                       "token")
    p.add_argument("--token-file", metavar="PATH", help="the token's file for --tcp (its first "
                   "line; default: $DISTSORT_TOKEN). Never the token itself on a command line")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="where to sort (default: GPUs when every rank has one)")
    p.add_argument("--report", metavar="FILE.json", help="write per-phase, per-rank timings")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")
    p.add_argument("--progress", action="store_true",
                   help="show progress on stderr even where it is not a terminal (default: "
                   "on a terminal, for steps longer than 2 s)")


def _format_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", help="element type of raw binary files (e.g. uint32, float64)")
    p.add_argument("--record-size", type=int, help="bytes per fixed-size record (the whole "
                   "record is its key unless --key-size gives fewer bytes)")
    p.add_argument("--key-size", type=int, help="leading bytes of a record that are its key "
                   "(default: all of them)")


def _run_options(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--count", type=parse_count,
                   help="keys in all (default: 2^28 per GPU, 2^22 per CPU)")
    p.add_argument("--dtype", default="uint32", help="key type (default uint32)")
    p.add_argument("--dist", default="uniform", help=DIST_HELP)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=commands.run_job)


def _field_names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"{text!r}: field names separated by commas")
    return names


def _sort_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("input")
    p.add_argument("-o", "--output", required=True)
    _format_options(p)
    _common(p)
    p.add_argument("--descending", action="store_true")
    p.add_argument("--stable", action="store_true", help="keep equal keys in input order")
    p.add_argument("--order", type=_field_names, metavar="FIELD[,FIELD...]",
                   help="a structured .npy: the fields to sort by first (the others break ties, "
                   "as in numpy.sort(a, order=...)); structured inputs always sort stably")
    p.add_argument("--argsort", action="store_true",
                   help="write the global permutation (int64) instead of the keys")
    p.add_argument("--values", help="file permuted along with the keys (.npy, or raw with "
                   "--values-dtype / --values-record-size)")
    p.add_argument("--values-dtype", help="dtype of a raw values file: any fixed-size NumPy "
                   "dtype (int64, datetime64[ns], S16, ...)")
    p.add_argument("--values-record-size", type=int, help="bytes per row of a raw values file")
    p.add_argument("--values-output", help="where the permuted values go "
                   "(default: OUTPUT with .values before its suffix; records of values: "
                   ".values.bin for an .npy OUTPUT)")
    p.add_argument("--verify", action="store_true",
                   help="check order, count and checksum before the output is published")
    p.add_argument("--durable", action="store_true",
                   help="flush the output to disk before it is published, so that it survives "
                   "a power cut or system crash too (slower: the disk's speed, not memory's)")
    p.add_argument("--device-memory", metavar="SIZE", type=size_argument,
                   help="device memory one rank may use, e.g. 8GiB (default: 70%% of the free "
                   "GPU memory); a rank whose sort needs more sorts out of core")
    # launched: seconds before the command ran that its report counts as "start" (None: since
    # the process started; a service's warm ranks set 0)
    p.set_defaults(func=commands.sort_file, launched=None)


def _gen_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("output")
    p.add_argument("--count", type=parse_count, required=True)
    p.add_argument("--dtype", help="element type (default uint32; none for gensort records)")
    p.add_argument("--dist", default="uniform", help=DIST_HELP)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--record-size", type=int, help="records of this size (gensort: 100)")
    p.add_argument("--key-size", type=int, help="key bytes of each record (gensort: 10)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=commands.gen_file)


def _bench_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=BACKENDS, default=None)
    p.add_argument("--count", type=parse_count,
                   help="largest size, keys in all (default: 2^28 per GPU, 2^21 per CPU)")
    p.add_argument("--steps", type=int, default=5, help="sizes, each 4x the one before")
    p.add_argument("--reps", type=int, default=3, help="timed runs per size (median kept)")
    p.add_argument("--dtype", default="uint32")
    p.add_argument("--dist", default="uniform", help=DIST_HELP)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", metavar="FILE.json", help="write the measurements as JSON")
    p.add_argument("--plot", metavar="FILE.png", help="also draw the table into a PNG (needs "
                   "matplotlib: pip install 'distsort[plot]')")
    p.set_defaults(func=commands.bench)


def _check_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("input")
    p.add_argument("output", help="the sorted input; with --argsort its int64 positions")
    _format_options(p)
    p.add_argument("--descending", action="store_true")
    p.add_argument("--values", nargs=2, metavar=("IN_VALUES", "OUT_VALUES"),
                   help="the input's values and the output's (sort --values): each value must "
                        "have stayed with its key")
    p.add_argument("--values-dtype", help="element type of raw values files (as for sort; "
                   "without it a raw OUT_VALUES is read in IN_VALUES' format, as sort wrote it)")
    p.add_argument("--values-record-size", type=int,
                   help="bytes per row of raw values files (as for sort)")
    p.add_argument("--stable", action="store_true",
                   help="with --values: equal keys' values must be in their input order too "
                        "(sort --stable)")
    p.add_argument("--argsort", action="store_true",
                   help="OUTPUT holds positions (sort --argsort): a permutation of the input's, "
                        "its keys in order, ties in input order (stable)")
    p.add_argument("--order", type=_field_names, metavar="FIELD[,FIELD...]",
                   help="a structured .npy: the fields it was sorted by first (as for sort)")
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="where to check (default: GPUs when every rank has one)")
    p.set_defaults(func=commands.check)


def parse_count(text: str) -> int:
    """Counts like 1000000, 1e9, 2^28 or 4*2^30."""
    try:
        value = 1
        for factor in text.replace("**", "^").split("*"):
            base, _, power = factor.partition("^")
            if power and int(power) < 0:  # 2^-1 is no whole count
                raise ValueError(power)
            value *= _whole(base) ** int(power) if power else _whole(base)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a count: {text!r} (a whole number of elements: "
                                         "try 1e9 or 2^28)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a count cannot be negative: {text}")
    return value


def _whole(text: str) -> int:
    """'12', '1e9' -> an int; ValueError for '1.5', '2.9e0' (counts are whole)."""
    try:
        return int(text)
    except ValueError:
        value = float(text)
        if not value.is_integer():
            raise
        return int(value)


if __name__ == "__main__":
    sys.exit(main())
