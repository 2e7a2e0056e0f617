"""The CPU ranks' exchange by cross-memory attach (transport/cma.py) against MPI's, and its
fallback to MPI, under MPI (pytest-mpi) at any rank count.

Run as `mpiexec -n P python -m pytest --with-mpi tests/transport/test_cma_mpi.py`.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest
from helpers import everything, local_data, reference

import distsort
from distsort import workers
from distsort.errors import DistsortError, RemoteError
from distsort.transport import cma
from distsort.transport.mpi import MpiTransport

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD

pytestmark = pytest.mark.mpi


@pytest.fixture
def transport() -> cma.CmaTransport:
    made = cma.connect(COMM)
    if made is None:
        pytest.skip("this kernel lets no rank read another's memory (process_vm_readv)")
    return made


def columns_for(send_counts: np.ndarray, seed: int) -> list:
    """Rows of three shapes, grouped by destination: 4-byte keys, (n, 3) int64 rows, 7-byte
    records (a width that is no word)."""
    rng = np.random.default_rng([seed, COMM.Get_rank()])
    n = int(send_counts.sum())
    return [rng.integers(0, 2**32, n, dtype=np.uint32),
            rng.integers(-2**62, 2**62, (n, 3), dtype=np.int64),
            rng.integers(0, 256, (n, 7), dtype=np.uint8)]


def counts(seed: int, most: int) -> tuple[np.ndarray, np.ndarray]:
    """Random send counts (some zero) and the matching receive counts."""
    p = COMM.Get_size()
    send = np.random.default_rng([seed, COMM.Get_rank()]).integers(0, most, p).astype(np.int64)
    send[np.arange(p) % 3 == 1] = 0
    recv = np.empty_like(send)
    COMM.Alltoall(send, recv)
    return send, recv


@pytest.mark.parametrize("piece", [cma.PIECE, 40])
def test_blocks_arrive_as_mpi_brings_them(transport, monkeypatch, piece):
    """Blocks back to back, and in pieces of 40 bytes read by the pool's threads."""
    monkeypatch.setattr(cma, "PIECE", piece)
    send, recv = counts(1, 300)
    columns = columns_for(send, 1)
    got = transport.alltoallv(columns, send, recv)
    want = MpiTransport(COMM).alltoallv(columns, send, recv)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_displacements_place_blocks_and_leave_the_gaps(transport):
    """Blocks taken from given send starts (rows between them unsent) into given receive
    starts of given buffers: the gaps keep what they held."""
    p = COMM.Get_size()
    send, recv = counts(2, 200)
    send_displs = np.cumsum(send + 5) - (send + 5)  # five unsent rows after each block
    recv_displs = np.cumsum(recv + 3) - (recv + 3)  # three rows of gap after each block
    columns = columns_for(send + 5, 2)
    outs = [np.full((int(recv_displs[-1] + recv[-1]),) + c.shape[1:], 7, c.dtype)
            for c in columns]
    got = transport.alltoallv(columns, send, recv, send_displs, recv_displs, outs)
    assert all(g is o for g, o in zip(got, outs))
    sent = COMM.allgather([[c[int(d) : int(d + n)] for c in columns]
                           for d, n in zip(send_displs, send)])
    rank = COMM.Get_rank()
    for q in range(p):
        at, n = int(recv_displs[q]), int(recv[q])
        for c, out in enumerate(outs):
            np.testing.assert_array_equal(out[at : at + n], sent[q][rank][c])
            assert (out[at + n : at + n + 3] == 7).all()


def test_a_sort_over_it_matches_numpy(monkeypatch):
    """The CPU runtime exchanges this way here; aligned blocks leave gaps the finish closes."""
    monkeypatch.setattr(cma.CmaTransport, "align_rows", 7)
    monkeypatch.setattr("distsort.runtime._cache", {})
    x = local_data("uniform", "float64", 900 + 31 * COMM.Get_rank(), seed=3)
    shard = distsort.sort(x, backend="cpu")
    np.testing.assert_array_equal(everything(shard), reference(everything(x), False))
    from distsort.runtime import get_runtime

    name = get_runtime(COMM, "cpu").transport.name
    assert name == ("cma" if cma.connect(COMM) is not None and COMM.Get_size() > 1 else "mpi")


def test_one_refusing_rank_keeps_every_rank_on_mpi(monkeypatch):
    if COMM.Get_rank() == COMM.Get_size() - 1:
        def refused(*args):
            raise OSError(1, "Operation not permitted")

        monkeypatch.setattr(cma, "read_from", refused)
    assert cma.connect(COMM) is None


def test_a_peer_under_another_pid_is_not_trusted(monkeypatch):
    """A rank whose read brings back another token (the PID names another process, as in
    another PID namespace) keeps every rank on MPI."""
    real = cma.read_from

    def wrong_token(pid, remote, local, nbytes):
        real(pid, remote, local, nbytes)
        ctypes.c_uint8.from_address(local).value ^= 1

    if COMM.Get_rank() == 0:
        monkeypatch.setattr(cma, "read_from", wrong_token)
    assert cma.connect(COMM) is None


def test_ranks_that_read_each_other_write_too(transport):
    assert transport.writes is True  # this kernel lets them (else connect() found no reads)


def test_one_rank_that_cannot_write_keeps_every_rank_from_writing(monkeypatch):
    """Reads allowed and a write refused (a seccomp profile may allow one call alone): every
    rank still reads (the exchange), none writes (the partition's push)."""
    if COMM.Get_rank() == COMM.Get_size() - 1:
        def refused(*args):
            raise OSError(1, "Operation not permitted")

        monkeypatch.setattr(cma, "write_to", refused)
    made = cma.connect(COMM)
    if made is None:
        pytest.skip("this kernel lets no rank read another's memory (process_vm_readv)")
    assert made.writes is False


def test_a_failed_read_fails_every_rank(transport, monkeypatch):
    """One rank's read refused mid-exchange: it raises a DistsortError, every other rank a
    RemoteError, and none waits for it."""
    send, recv = counts(4, 50)
    send[:] = recv[:] = 1
    if COMM.Get_rank() == 0:
        def refused(*args):
            raise OSError(3, "No such process")

        monkeypatch.setattr(cma, "read_from", refused)
    with pytest.raises(DistsortError if COMM.Get_rank() == 0 else RemoteError) as caught:
        transport.alltoallv(columns_for(send, 4), send, recv)
    if COMM.Get_rank() == 0:
        assert "could not read a peer rank's memory" in str(caught.value)


def test_a_failed_read_raises_once_every_other_read_is_over(transport, monkeypatch):
    """One read fails while the others run on the pool's threads: alltoallv raises only when
    none is left writing into the receive buffer. The others wait (at most 0.5 s) for the error
    to be caught: raised before they end, the count below is short."""
    threads = workers.threads()
    workers.use_threads(3)
    send, recv = counts(6, 200)
    send[:], recv[:] = 100, 100  # one read from every peer
    caught, started, done = threading.Event(), [], []
    real = cma.read_from

    def reader(*args):
        if not started:
            started.append(args)
            raise OSError(5, "Input/output error")
        caught.wait(0.5)
        real(*args)
        done.append(args)

    if COMM.Get_rank() == 0:
        monkeypatch.setattr(cma, "read_from", reader)
    keys = columns_for(send, 6)[:1]
    try:
        with pytest.raises(DistsortError if COMM.Get_rank() == 0 else RemoteError):
            transport.alltoallv(keys, send, recv)
        if COMM.Get_rank() == 0:
            assert len(done) == COMM.Get_size() - 1
    finally:
        caught.set()
        workers.use_threads(threads)
