"""The CUDA sources load with the instantiations the drivers ask for (checked without a GPU by
a stand-in for cupy.RawModule that records what it is given)."""

from __future__ import annotations

import os
import sys
import types

import pytest

compiled_in: list = []


@pytest.fixture
def fake_cupy(monkeypatch):
    made = []
    compiled_in.clear()

    class RawModule:
        def __init__(self, code, options, name_expressions):
            made.append((code, options, name_expressions))

        def get_function(self, name):  # where CuPy compiles: note the cache it would use
            folder = os.environ.get("CUPY_CACHE_DIR")
            if folder == "/unwritable":
                raise PermissionError(13, "Permission denied", folder)
            compiled_in.append(folder)

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(RawModule=RawModule))
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
    (code, options, names), = fake_cupy
    assert "-std=c++17" in options and len(names) == sum(kernels.values())
    for kernel, count in kernels.items():
        bare = kernel.split("<")[0]
        assert f"__global__ void {bare}(" in code or f") {bare}(" in code
        assert sum(n.startswith(kernel if "<" in kernel else kernel + "<") for n in names) == count


def test_kernels_compile_into_distsorts_cache_and_cupys_setting_is_kept(fake_cupy, monkeypatch):
    """Jobs find the kernels `compile` built in the package's folder (or
    $DISTSORT_KERNEL_CACHE) whatever their HOME; CUPY_CACHE_DIR is the caller's again after;
    where the folder cannot be written, CuPy's own cache takes the kernel."""
    from distsort import cuda_source, keys

    monkeypatch.setenv("CUPY_CACHE_DIR", "/users/own")
    monkeypatch.delenv("DISTSORT_KERNEL_CACHE", raising=False)
    keys.compile_all()
    assert compiled_in == [os.path.join(os.path.dirname(cuda_source.__file__), "kernels")]
    assert os.environ["CUPY_CACHE_DIR"] == "/users/own"
    cuda_source.load_module.cache_clear()
    monkeypatch.setenv("DISTSORT_KERNEL_CACHE", "/unwritable")
    keys.compile_all()
    assert compiled_in[-1] == "/users/own"
