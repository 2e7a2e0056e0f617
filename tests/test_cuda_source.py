"""The CUDA sources load with the instantiations the drivers ask for (checked without a GPU by
a stand-in for cupy.RawModule that records what it is given)."""

from __future__ import annotations

import os
import sys
import types

import pytest


class CupyCache:
    """CuPy 14's disk kernel cache, in a dict."""

    def __init__(self):
        self.files: dict = {}

    def load(self, name):
        return self.files.get(name)

    def save(self, name, cubin, source):
        self.files[name] = cubin


@pytest.fixture
def fake_cupy(monkeypatch):
    made = []
    compiler = types.SimpleNamespace(_kernel_cache_backend=CupyCache(),
                                     _empty_file_preprocess_cache={})
    compiler._set_kernel_cache_backend = lambda b: setattr(compiler, "_kernel_cache_backend", b)

    class RawModule:
        def __init__(self, code, options, name_expressions):
            made.append((code, options, name_expressions))
            self.key = f"{hash((code, options, tuple(name_expressions)))}.cubin"
            self.env = ("sm_90", options, (13, 0), "nvrtc")

        def get_function(self, name):  # CuPy compiles here, through its cache backend
            table = compiler._empty_file_preprocess_cache  # NVRTC's answer, in every key
            if self.env not in table:
                made.append("preprocessed")
                table[self.env] = b"// NVRTC 13.0 for " + repr(self.env).encode()
            cache = compiler._kernel_cache_backend
            if cache.load(self.key) is None:
                made.append("compiled")
                cache.save(self.key, b"cubin of " + self.key.encode(), "source")

    cuda = types.SimpleNamespace(compiler=compiler)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(RawModule=RawModule,
                                                                   cuda=cuda))
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    from distsort.cuda_source import load_module

    load_module.cache_clear()
    yield made
    load_module.cache_clear()


@pytest.mark.parametrize("loader, args, kernels", [
    ("distsort.keys:_module", (), {"encode_keys": 4, "decode_keys": 4, "record_word": 4}),
    ("distsort.local.rows:_module", (), {"take_rows": 18}),
    # one key width and one bit count of the largest bucket number (4 buckets: 2 bits)
    ("distsort.local.partition:_module", ("unsigned int", 4),
     {"partition_count<unsigned int>": 1, "partition_scatter<unsigned int,2>": 1}),
])
def test_every_requested_template_is_defined_in_its_source(fake_cupy, loader, args, kernels):
    module, name = loader.split(":")
    getattr(__import__(module, fromlist=[name]), name)(*args)
    code, options, names = fake_cupy[0]
    assert "-std=c++17" in options and len(names) == sum(kernels.values())
    for kernel, count in kernels.items():
        bare = kernel.split("<")[0]
        assert f"__global__ void {bare}(" in code or f") {bare}(" in code
        assert sum(n.startswith(kernel if "<" in kernel else kernel + "<") for n in names) == count


def test_kernels_compile_once_into_distsorts_folder(fake_cupy, monkeypatch, tmp_path):
    """`compile` (fill) puts the kernels in distsort's folder; a later job (a fresh HOME: CuPy's
    own cache empty) loads them from it without compiling, and saves what it compiles itself
    into CuPy's cache; a damaged file is compiled again; where the folder cannot be written,
    `compile` leaves the kernel in CuPy's own cache."""
    from cupy.cuda import compiler

    from distsort import cuda_source, keys

    theirs = compiler._kernel_cache_backend
    monkeypatch.setenv("DISTSORT_KERNEL_CACHE", str(tmp_path / "kernels"))

    def job(fill: bool) -> None:  # a new process: CuPy's own backend in place
        compiler._set_kernel_cache_backend(theirs)
        cuda_source.use_kernel_cache(fill)
        cuda_source.load_module.cache_clear()
        keys.compile_all()

    job(fill=True)
    assert fake_cupy.count("compiled") == 1 and len(os.listdir(tmp_path / "kernels")) == 1
    assert theirs.files == {}
    job(fill=False)
    assert fake_cupy.count("compiled") == 1
    (tmp_path / "kernels" / os.listdir(tmp_path / "kernels")[0]).write_bytes(b"torn")
    job(fill=False)
    assert fake_cupy.count("compiled") == 2 and len(theirs.files) == 1
    cuda_source.use_kernel_cache()
    assert compiler._kernel_cache_backend.fallback is theirs  # never stacked
    theirs.files.clear()
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("DISTSORT_KERNEL_CACHE", str(tmp_path / "file" / "kernels"))
    job(fill=True)
    assert fake_cupy.count("compiled") == 3 and len(theirs.files) == 1


def test_compile_keeps_kernels_compiled_before_it_ran(fake_cupy, monkeypatch, tmp_path):
    """Sorts (or tests) ran before `compile` on this machine: their kernels are in CuPy's own
    cache, so CuPy loads rather than compiles them; `compile` still puts them in the folder,
    and a fresh job (an empty CuPy cache) finds them there."""
    from cupy.cuda import compiler

    from distsort import cuda_source, keys

    theirs = compiler._kernel_cache_backend
    monkeypatch.setenv("DISTSORT_KERNEL_CACHE", str(tmp_path / "kernels"))

    def job(fill: bool) -> None:
        compiler._set_kernel_cache_backend(theirs)
        cuda_source.use_kernel_cache(fill)
        cuda_source.load_module.cache_clear()
        keys.compile_all()

    job(fill=False)  # an early sort: compiled into CuPy's cache
    assert fake_cupy.count("compiled") == 1 and len(theirs.files) == 1
    job(fill=True)
    assert fake_cupy.count("compiled") == 1 and len(os.listdir(tmp_path / "kernels")) == 1
    theirs.files.clear()  # a fresh HOME
    job(fill=False)
    assert fake_cupy.count("compiled") == 1


def test_compile_keeps_the_compilers_fingerprints_so_jobs_run_no_nvrtc(fake_cupy, monkeypatch,
                                                                        tmp_path):
    """CuPy runs NVRTC on an empty source once for each set of options a process meets, for
    the kernels' cache keys, even where every kernel is cached. `compile` keeps those answers
    in the folder and a fresh job takes them: it runs NVRTC for nothing. A torn file, or one
    another compile wrote meanwhile, costs NVRTC's runs again, never a wrong kernel."""
    from cupy.cuda import compiler

    from distsort import cuda_source, keys
    from distsort.local import digit_partition

    theirs = compiler._kernel_cache_backend
    folder = tmp_path / "kernels"
    monkeypatch.setenv("DISTSORT_KERNEL_CACHE", str(folder))

    def job(fill: bool, *compile_all) -> None:  # a new process: CuPy's tables empty
        compiler._set_kernel_cache_backend(theirs)
        compiler._empty_file_preprocess_cache = {}
        cuda_source.use_kernel_cache(fill)
        cuda_source.load_module.cache_clear()
        digit_partition._module.cache_clear()
        for each in compile_all:
            each()
        if fill:
            cuda_source.remember_fingerprints()

    job(True, keys.compile_all)
    assert fake_cupy.count("preprocessed") == 1
    job(False, keys.compile_all)
    assert fake_cupy.count("preprocessed") == 1 and fake_cupy.count("compiled") == 1
    compiler._empty_file_preprocess_cache[("sm_90", (object(),), (13, 0), "nvrtc")] = b"odd"
    cuda_source.remember_fingerprints()  # an entry that is no literal is left out
    assert len(cuda_source.read_fingerprints(str(folder))) == 1
    job(True, digit_partition.compile_all)  # another option set: kept beside the first
    assert len(cuda_source.read_fingerprints(str(folder))) == 2
    known = fake_cupy.count("preprocessed")
    job(False, keys.compile_all, digit_partition.compile_all)
    assert fake_cupy.count("preprocessed") == known
    compiler._empty_file_preprocess_cache = {"mine": b"kept"}
    cuda_source.seed_fingerprints(str(folder), compiler._empty_file_preprocess_cache)
    assert compiler._empty_file_preprocess_cache["mine"] == b"kept"  # its own answers stay
    (folder / cuda_source.FINGERPRINTS).write_bytes(b"torn")
    job(False, keys.compile_all)
    assert fake_cupy.count("preprocessed") == known + 1
    assert cuda_source.read_fingerprints(str(folder)) == []


def test_shared_device_code_is_inlined_where_a_source_includes_it(tmp_path, monkeypatch):
    from distsort import cuda_source

    for name in ("steps/sample.cu", "check.cu"):
        text = cuda_source.source(name)
        assert "#include" not in text and text.count("u64 splitmix64(u64 z)") == 1
    for name in ("local/radix.cu", "local/digit_partition.cu", "local/partition.cu"):
        text = cuda_source.source(name)  # warp.cuh once, whether included directly or not
        assert "#include" not in text and text.count("u32 match_peers(u32 d)") == 1
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.cuh").write_text("int a;\n")
    (tmp_path / "sub" / "b.cuh").write_text('#include "../a.cuh"\nint b;\n')
    (tmp_path / "k.cu").write_text('#include "sub/b.cuh"\n#include "a.cuh"\n#include <cstdint>\n'
                                   'int k;\n')
    monkeypatch.setattr(cuda_source, "HERE", str(tmp_path))
    assert cuda_source.source("k.cu") == "int a;\n\nint b;\n\n\n#include <cstdint>\nint k;\n"
