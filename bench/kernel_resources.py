"""Every CUDA kernel that `python -m distsort compile` builds, compiled offline by nvcc (no GPU,
no CuPy): its registers, spills and shared memory per instance, for an architecture.

    python bench/kernel_resources.py [--arch sm_90] [--only radix_onesweep] [--keep DIR]

Why: device time is short, and a kernel change that does not compile, or that spills, wastes a
device call (a fresh machine's `compile` alone takes ~105 s). The development machine has nvcc
(CUDA 13): this compiles the same sources (cuda_source.source: includes inlined), options and
instances (the name expressions each module's compile_all asks NVRTC for, instantiated here by
taking their addresses) into cubins, and prints ptxas's account of each; with --keep, the
cubins stay in DIR for `cuobjdump -sass` (the instructions a key costs). The numbers are
ptxas's for the architecture asked, as NVRTC's on that GPU (the same compiler back end).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from distsort import cuda_source  # noqa: E402

PTXAS = re.compile(r"Function properties for (\S+)|Compiling entry function '(\S+)'"
                   r"|Used (\d+) registers.*?(\d+) bytes smem|(\d+) bytes spill stores")


def recorded_modules() -> list[tuple[str, tuple, tuple]]:
    """(source, options, names) of every module the compile command builds, recorded instead of
    compiled (the same list as commands._compile_cuda's modules)."""
    from distsort import check, keys
    from distsort.local import digit_partition, partition, radix, rows, tiles
    from distsort.steps import sample

    seen: list[tuple[str, tuple, tuple]] = []

    def record(source: str, options: tuple, names: tuple):
        seen.append((source, options, tuple(names)))
        return mock.MagicMock()

    # no CuPy here: compile_apart's device contexts are a stand-in's
    with mock.patch.object(cuda_source, "compiled", record), \
            mock.patch.dict(sys.modules, {"cupy": mock.MagicMock()}):
        for module in (radix, digit_partition, check, keys, sample, partition, rows, tiles):
            module.compile_all()
    return list({(s, o, n): None for s, o, n in seen})  # a module asked for twice, once


def compile_module(source: str, options: tuple, names: tuple, arch: str, out: str) -> str:
    """ptxas's report of the module with its instances, compiled to out (a .cubin)."""
    anchors = "".join(f"\nstatic void* const distsort_instance_{i} = (void*)&{name};"
                      for i, name in enumerate(names))  # taking the address instantiates it
    with tempfile.NamedTemporaryFile("w", suffix=".cu", delete=False) as f:
        f.write(source + anchors + "\n")
    try:
        done = subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-o", out, "--resource-usage",
                               *options, f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if done.returncode != 0:
        raise SystemExit(f"nvcc failed ({' '.join(options)}):\n{done.stderr[-4000:]}")
    return done.stderr + done.stdout


def demangle(names: list[str]) -> dict[str, str]:
    """The kernels' C++ names (GNU's c++filt reads nvcc's mangling), or the mangled ones."""
    try:
        done = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                              text=True)
    except OSError:
        return dict(zip(names, names))
    return dict(zip(names, done.stdout.splitlines() if done.returncode == 0 else names))


def report(text: str) -> list[tuple[str, int, int, int]]:
    """(kernel, registers, shared bytes, spill store bytes) from ptxas's --resource-usage."""
    rows, name, spill = [], None, 0
    for match in PTXAS.finditer(text):
        entry, compiling, registers, smem, spilled = match.groups()
        if entry or compiling:
            name, spill = entry or compiling, 0
        elif spilled is not None:
            spill = int(spilled)
        elif registers is not None and name is not None:
            rows.append((name, int(registers), int(smem), spill))
            name = None
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--only", default="", help="kernels whose name holds this")
    parser.add_argument("--keep", default="", help="a folder for the cubins")
    args = parser.parse_args()
    folder = args.keep or tempfile.mkdtemp()
    os.makedirs(folder, exist_ok=True)
    rows = []
    for i, (source, options, names) in enumerate(recorded_modules()):
        text = compile_module(source, options, names, args.arch,
                              os.path.join(folder, f"module{i}.cubin"))
        defines = " ".join(o for o in options if o.startswith("-D"))
        rows += [(kernel, *rest, f"module{i}", defines) for kernel, *rest in report(text)]
    names = demangle([r[0] for r in rows])
    print(f"{'registers':>9} {'smem B':>7} {'spill B':>7}  kernel (cubin; its defines)")
    for kernel, registers, smem, spill, cubin, defines in rows:
        if args.only in names[kernel]:
            print(f"{registers:>9} {smem:>7} {spill:>7}  {names[kernel]} ({cubin}; {defines})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
