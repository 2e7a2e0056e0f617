"""Helpers the test modules share: data sets, NumPy references, comparisons and the runner of
the command line under mpiexec. Test modules import from here, never from each other."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

from distsort import Client, DistsortError

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD
RANKS = 4  # ranks of the command-line runs
START_LIMIT = 60  # seconds a service may take to say it listens (a busy 2-core machine)


def everything(x) -> np.ndarray:
    """All ranks' pieces concatenated in rank order (on every rank)."""
    return np.concatenate(COMM.allgather(np.asarray(x)))


def reference(data: np.ndarray, descending: bool) -> np.ndarray:
    """NumPy's sorted order; descending keeps NaN last as distsort promises."""
    ref = np.sort(data, kind="stable")
    if not descending:
        return ref
    nan = np.isnan(ref) if ref.dtype.kind == "f" else np.zeros(len(ref), bool)
    return np.concatenate([ref[~nan][::-1], ref[nan]])


def reference_order(data: np.ndarray, descending: bool) -> np.ndarray:
    """The stable permutation under NumPy semantics (-0.0 == 0.0, NaNs equal, ties in order)."""
    if not descending:
        return np.argsort(data, kind="stable")
    if data.dtype.kind == "f":
        nan = np.isnan(data)
        key = -np.where(nan, 0, data).astype(np.float64)  # NaN's place is the nan column
        return np.lexsort((key, nan))
    return np.argsort(-data.astype(object), kind="stable").astype(np.int64)


def check_pairs_and_argsort_keep_ties(keys: np.ndarray) -> None:
    """distsort.sort_pairs (stable) and argsort of this rank's keys on the CPU backend, both
    ways: ties in global input order, as NumPy's stable sort orders them (collective)."""
    import distsort

    start = COMM.exscan(len(keys)) or 0
    values = np.arange(start, start + len(keys), dtype=np.int64)
    everyone = everything(keys)
    for descending in (False, True):
        order = reference_order(everyone, descending)
        k, v = distsort.sort_pairs(keys, values, backend="cpu", descending=descending,
                                   stable=True)
        np.testing.assert_array_equal(everything(v), order)
        np.testing.assert_array_equal(everything(k), everyone[order])
        positions = distsort.argsort(keys, backend="cpu", descending=descending)
        np.testing.assert_array_equal(everything(positions), order)


def local_data(dist: str, dtype: str, n: int, seed: int) -> np.ndarray:
    """This rank's piece of a data set; 'sorted'/'reverse' are global orders across ranks."""
    rng = np.random.default_rng([seed, COMM.Get_rank()])
    dt = np.dtype(dtype)
    if dist == "uniform":
        x = rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).view(dt)
        return np.nan_to_num(x, nan=1.5) if dt.kind == "f" else x
    if dist == "normal":
        x = rng.standard_normal(n) * (100 if dt.itemsize > 1 else 30)
    elif dist == "zipf":
        x = np.minimum(rng.zipf(1.3, n), 120)
    elif dist == "equal":
        x = np.full(n, 7)
    elif dist == "fewdistinct":
        x = rng.integers(0, 16, n) * 3
    elif dist in ("sorted", "reverse"):
        start, total = COMM.exscan(n) or 0, max(COMM.allreduce(n), 1)
        x = np.arange(start, start + n) * 100 // total  # a monotone function of global position
        x = x if dist == "sorted" else 100 - x
    else:  # specials: extremes, and for floats NaN, +-inf, -0.0
        codes = rng.integers(-3, 4, n)
        x = np.abs(codes).astype(dt)
        if dt.kind == "f":
            x[codes == 3], x[codes == -3], x[codes == 2] = np.nan, -np.inf, -0.0
        else:
            x[codes == 3], x[codes == -3] = np.iinfo(dt).max, np.iinfo(dt).min
        return x
    if dt.kind == "u":
        x = np.abs(x)
    return np.asarray(x).astype(dt)


def assert_balanced(shard, total: int) -> None:
    p = COMM.Get_size()
    biggest = max(COMM.allgather(len(shard)))
    assert biggest <= max(-(-total // p), 1.05 * total / p), (biggest, total, p)


def odd_values(kind: str, n: int, start: int) -> np.ndarray:
    """Values of a dtype CuPy lacks, each naming its global input position start + i."""
    i = np.arange(start, start + n)
    if kind == "datetime":
        return i.astype("datetime64[ns]")
    if kind == "bytes":
        return np.char.encode(np.char.zfill(i.astype(str), 9))  # S9: 9-byte rows
    if kind == "str":
        return np.char.zfill(i.astype(str), 3)  # <U3 and longer where i has more digits
    rows = np.zeros(n, dtype=[("pos", ">i8"), ("tag", "S3")])
    rows["pos"], rows["tag"] = i, b"abc"
    return rows


def keys_with_specials(dtype: str, n: int) -> np.ndarray:
    """Random keys with ties; floats also hold -0.0, 0.0, infinities and NaNs whose payloads
    differ (a wrong byte order shows in any of them)."""
    rng = np.random.default_rng([COMM.Get_rank(), 41])
    dt = np.dtype(dtype)
    x = rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).view(dt)
    if dt.kind != "f" or n < 8:
        return x
    word = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
    nan_bits = np.array(np.nan, dt).view(word)
    x[:8] = [-0.0, 0.0, np.inf, -np.inf, 1.0, 1.0, 0, 0]
    x[6:8] = np.array([nan_bits | 1, nan_bits | 3], word).view(dt)
    return x


def bits(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x.astype(x.dtype.newbyteorder("=")).view(np.uint8).reshape(len(x), -1)


def same_bits(got: np.ndarray, want: np.ndarray, exact: bool) -> None:
    """got equals want byte for byte (exact), or is in the same order by value and holds the
    same bits (equal keys -- -0.0 and 0.0, NaNs -- may come in any order)."""
    if exact:
        np.testing.assert_array_equal(bits(got), bits(want))
        return
    np.testing.assert_array_equal(got.astype(got.dtype.newbyteorder("=")), want)  # NaNs equal
    for a, b in zip(np.unique(bits(got), axis=0, return_counts=True),
                    np.unique(bits(want), axis=0, return_counts=True)):
        np.testing.assert_array_equal(a, b)


def tie_heavy(dist: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """This rank's int32 keys with many ties (or globally sorted), and their global positions."""
    rank = COMM.Get_rank()
    rng = np.random.default_rng(rank)
    x = {"equal": np.full(n, 3), "fewdistinct": rng.integers(0, 9, n),
         "sorted": np.arange(n) + rank * n}[dist].astype(np.int32)
    start = COMM.exscan(n) or 0
    return x, np.arange(start, start + n)


def mpiexec() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = here if os.path.exists(here) else shutil.which("mpiexec") or shutil.which("mpirun")
    if not found:
        pytest.skip("no mpiexec found")
    return found


def distsort(*args: str, ranks: int = RANKS, cwd=None) -> subprocess.CompletedProcess:
    """Run `python -m distsort args` on `ranks` ranks (CPU backend); never hangs past 120 s."""
    env = dict(os.environ, DISTSORT_BACKEND="cpu")
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
    cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "distsort", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


def mixed_keys(dtype: str, n: int = 6000) -> np.ndarray:
    """Uniform, normal, few-distinct, all-equal, sorted and reverse runs, plus specials."""
    rng = np.random.default_rng(0)
    dt = np.dtype(dtype)
    parts = [
        rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).view(dt),
        (rng.standard_normal(n) * 50).astype(dt) if dt.kind != "u" else rng.integers(0, 99, n),
        rng.integers(0, 16, n),
        np.full(n, 5),
        np.arange(n) % 120,
        (np.arange(n) % 120)[::-1],
    ]
    x = np.concatenate([np.asarray(p).astype(dt) for p in parts])
    if dt.kind == "f":
        x[::97] = np.nan
        x[::89] = -0.0
        x[::83] = np.inf
    return x


def bool_or_time_keys(kind: str, n: int) -> np.ndarray:
    """This rank's keys of a bool, datetime64 or timedelta64 dtype: ties, the extremes and NaT,
    big-endian on odd ranks (datetime and timedelta)."""
    rng = np.random.default_rng([COMM.Get_rank(), 77])
    if kind == "bool":
        return rng.integers(0, 2, n).astype(bool)
    bits = rng.integers(-50, 50, n)
    bits[::7] = np.iinfo(np.int64).min  # NaT
    bits[1::11] = np.iinfo(np.int64).min + 1  # the earliest value that is not NaT
    bits[2::13] = np.iinfo(np.int64).max
    x = bits.view(kind)
    return x.astype(x.dtype.newbyteorder(">")) if COMM.Get_rank() % 2 else x


def bool_or_time_order(data: np.ndarray, descending: bool) -> np.ndarray:
    """The stable permutation NumPy's order gives (NaT last in both orders; descending: the
    rest reversed, ties in input order)."""
    if data.dtype.kind == "b":
        return np.argsort(~data if descending else data, kind="stable")
    nat, value = np.isnat(data), data.astype(data.dtype.newbyteorder("=")).view(np.int64)
    rank = np.where(nat, 0, value)  # NaT's own bits would sort first
    return np.lexsort((-rank if descending else rank, nat))


STRUCTURED = np.dtype([("a", "<i2"), ("b", ">f8"), ("t", "<M8[s]"), ("s", "S3"), ("u", "<U2"),
                       ("z", "?"), ("d", "<m8[ms]"), ("h", "<f2")])


def structured_rows(n: int, seed) -> np.ndarray:
    """Rows of every kind of field, with few distinct values a field (ties across fields),
    NaN, NaT, -0.0 and a big-endian field. (No float16 NaN: NumPy's sort of structured arrays
    puts those first, unlike its 1-D sorts and distsort, which put every NaN last.)"""
    rng = np.random.default_rng(seed)
    rows = np.zeros(n, STRUCTURED)
    rows["a"] = rng.integers(-2, 3, n)
    b = rng.choice([-1.5, -0.0, 0.0, 2.25, np.inf, np.nan], n)
    rows["b"] = b
    t = rng.integers(-2, 3, n).astype("M8[s]")
    t[rng.random(n) < 0.15] = np.datetime64("NaT", "s")
    rows["t"] = t
    rows["s"] = rng.choice([b"", b"a", b"ab", b"b\x00c", b"\xff"], n)
    rows["u"] = rng.choice(["", "x", "xy", "\u00e9", "\U0001f600"], n)
    rows["z"] = rng.random(n) < 0.5
    d = rng.integers(-3, 3, n).astype("m8[ms]")
    d[rng.random(n) < 0.1] = np.timedelta64("NaT", "ms")
    rows["d"] = d
    rows["h"] = rng.choice([np.float16(1), np.float16(-2), np.float16(-0.0)], n)
    return rows


def string_keys(kind: str, n: int, seed) -> np.ndarray:
    """Keys of bytes ("S": NUL bytes inside and at the end, 0xff), unicode strings ("U": empty,
    accented, beyond the BMP, big-endian too) or raw void ("V"), with many ties."""
    rng = np.random.default_rng(seed)
    if kind == "S":
        return rng.choice([b"", b"a", b"a\x00b", b"ab", b"b", b"\xff", b"\x00\x01"], n).astype("S3")
    if kind == "U":
        words = rng.choice(["", "x", "xy", "\u00e9", "\U0001f600", "Z", "x\u00e9"], n)
        return words.astype(">U2" if seed % 2 else "<U2")
    return np.frombuffer(rng.integers(0, 3, 2 * n, dtype=np.uint8).tobytes(), "V2").copy()


def complex_keys(n: int, seed, dtype=np.complex128) -> np.ndarray:
    """Complex keys with many ties, NaN in either part or both, -0.0 and infinities; for odd
    seeds big-endian."""
    rng = np.random.default_rng(seed)
    parts = rng.choice([-np.inf, -1.5, -0.0, 0.0, 2.0, np.inf, np.nan], (2, n),
                       p=[0.05, 0.25, 0.1, 0.2, 0.25, 0.05, 0.1])
    keys = np.empty(n, dtype)
    keys.real, keys.imag = parts  # not parts[0] + 1j * parts[1]: 1j * inf has a NaN real part
    return keys.astype(keys.dtype.newbyteorder(">")) if seed % 2 else keys


class Service:
    """`distsort serve` on `ranks` ranks and the backend, its socket in a test's folder; with
    `token`, on a free TCP port of 127.0.0.1 instead, the token in a file of that folder."""

    def __init__(self, folder, *extra: str, fault: str = "", ranks: int = 2,
                 backend: str = "cpu", token: str = ""):
        self.socket, self.token = str(folder / "s.sock"), token
        env = dict(os.environ, DISTSORT_BACKEND=backend, DISTSORT_FAULT=fault)
        env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
        where = ["--socket", self.socket]
        if token:
            (folder / "token").write_text(token + "\n")
            where = ["--tcp", "127.0.0.1:0", "--token-file", str(folder / "token")]
        cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "distsort", "serve", *where,
               *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)
        self.client = Client(self.socket)

    def started(self) -> str:
        """The service's first line (it listens once it printed it), or what it printed when
        it ended instead; a service that says nothing in START_LIMIT s is killed. On TCP, the
        client then talks to the port it names."""
        timer = threading.Timer(START_LIMIT, self.proc.kill)
        timer.start()
        try:
            line = self.proc.stdout.readline()
        finally:
            timer.cancel()
        if self.token and " on 127.0.0.1:" in line:
            self.tcp = line.split(" on ")[1].split()[0]
            self.client = Client(tcp=self.tcp, token=self.token)
        return line or self.proc.stderr.read()

    def stop(self) -> int:
        if self.proc.poll() is None:
            try:
                self.client.shutdown()
            except DistsortError:
                pass
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
