"""Which transport moves rows between GPUs (transport/choice.py), for every placement of ranks on
nodes and devices and every $DISTSORT_TRANSPORT; and the runtime builds what it names (with the
transports faked: no GPU here). Between CPU ranks: which build.host_transport makes."""

from __future__ import annotations

import pytest

from distsort import runtime
from distsort.errors import DistsortError
from distsort.transport import build, choice, ipc, nccl, staged
from distsort.transport.choice import (
    ALONE,
    HOST,
    IPC,
    IPC_HOST,
    IPC_THEN_NCCL,
    NCCL,
    Placement,
)


def place(devices: str, nodes: str | None = None) -> Placement:
    """'0123' (one GPU a rank), '0000' (four ranks on GPU 0); nodes likewise ('0011')."""
    nodes = nodes or "0" * len(devices)
    return Placement(tuple((int(n), f"host{n}") for n in nodes),
                     tuple(f"0000:{int(d):02x}:00.0" for d in devices))


@pytest.mark.parametrize("setting, devices, nodes, want", [
    ("auto", "0", None, ALONE), ("ipc", "0", None, IPC), ("nccl", "0", None, NCCL),
    ("auto", "01", None, IPC), ("auto", "012", None, IPC_THEN_NCCL),
    ("auto", "0123", None, IPC_THEN_NCCL), ("auto", "0123", "0011", NCCL),
    ("ipc", "0123", None, IPC), ("nccl", "01", None, NCCL), ("nccl", "0123", None, NCCL),
    ("ipc", "01", "01", NCCL),  # across nodes the copy engines cannot reach: NCCL
    ("auto", "00", None, IPC_HOST), ("auto", "0000", None, IPC_HOST),
    ("ipc", "0000", None, IPC_HOST), ("auto", "010", None, IPC_HOST),  # 3 ranks on 2 GPUs
    ("auto", "0000", "0011", HOST),  # shared GPUs on two nodes: through host memory
])
def test_nccl_only_where_every_rank_has_its_own_gpu(setting, devices, nodes, want):
    assert choice.choose(setting, place(devices, nodes)) == want


def test_the_same_gpu_on_two_nodes_is_not_shared():
    assert choice.choose("auto", place("00", "01")) == NCCL


def test_nccl_asked_for_on_a_shared_gpu_names_the_ranks_and_the_gpu():
    with pytest.raises(DistsortError) as error:
        choice.choose("nccl", place("010"))
    assert "ranks 0, 2 share GPU 0000:00:00.0 on host host0" in str(error.value)
    assert "Unset DISTSORT_TRANSPORT" in str(error.value)


def test_an_unknown_transport_is_named_in_the_error():
    with pytest.raises(DistsortError, match="'tcp': choose one of auto, ipc, nccl"):
        choice.choose("tcp", place("01"))


def test_sharing_counts_the_ranks_that_split_a_device():
    where = place("0100", "0001")
    assert [len(where.sharing(r)) for r in range(4)] == [2, 1, 2, 1]
    assert where.shared_devices() == [[0, 2]]


def test_info_line_says_what_and_why():
    line = choice.describe(IPC_HOST, "auto", place("00"))
    assert line.startswith("device copies through CUDA IPC")
    assert "ranks 0, 1 share GPU 0000:00:00.0" in line and "DISTSORT_TRANSPORT=auto" in line
    assert "rank 0 sorts every rank's rows" in line and "DISTSORT_SHARED_GPU=fold" in line
    assert "rank 0 sorts" not in choice.describe(IPC_HOST, "auto", place("00"), "split")
    assert "rank 0 sorts" not in choice.describe(IPC_HOST, "auto", place("001"))


@pytest.mark.parametrize("devices, nodes, fold", [
    ("0000", None, True), ("00", None, True), ("0", None, False), ("0011", None, False),
    ("0001", None, False), ("00", "01", False),  # one GPU each on two nodes: not one GPU
])
def test_the_sort_folds_only_where_every_rank_runs_on_one_gpu(devices, nodes, fold):
    where = place(devices, nodes)
    assert choice.folds("fold", where) == fold
    assert not choice.folds("split", where)


def test_cpus_never_fold_and_an_unknown_shared_gpu_setting_is_named():
    assert not choice.folds("fold", Placement(((0, "h"),) * 2, (None,) * 2))
    with pytest.raises(DistsortError, match="DISTSORT_SHARED_GPU='spread'"):
        choice.folds("spread", place("00"))


class Comm:
    """One rank's communicator, as agree and the transport factory use it."""

    def Get_size(self):  # noqa: N802 - mpi4py's name
        return 1

    def allgather(self, x):
        return [x]


@pytest.mark.parametrize("devices, nodes, built", [
    ("01", None, "ipc over host, then nccl"), ("0123", None, "ipc over host, then nccl, all"),
    ("0123", "0011", "nccl"),
    ("0000", None, "ipc over host"),
    ("0000", "0011", "host"), ("0", None, "alone"),
])
def test_the_runtime_builds_the_choice(monkeypatch, devices, nodes, built):
    monkeypatch.delenv("DISTSORT_TRANSPORT", raising=False)
    monkeypatch.setattr(nccl, "NcclTransport", lambda comm: "nccl")
    monkeypatch.setattr(staged, "StagedTransport", lambda comm, name="host": name)
    monkeypatch.setattr(ipc, "connect", lambda comm, small, nccl=None, every_call=False:
                        f"ipc over {small}" + (f", then {nccl()}" if nccl else "")
                        + (", all" if every_call else ""))
    assert build.gpu_transport(Comm(), place(devices, nodes)) == built


class Ranked:
    def __init__(self, rank: int):
        self.rank = rank

    def Get_rank(self) -> int:  # noqa: N802 (MPI's name)
        return self.rank


@pytest.mark.parametrize("where, rank, sharers, shared", [
    (place("0100"), 0, 3, True), (place("0100"), 1, 1, True), (place("0123"), 2, 1, False),
    (Placement(((0, "h"),) * 3, (None,) * 3), 1, 3, False),  # CPUs: the node's ranks
    (None, 0, 1, False),
])
def test_ranks_that_share_a_device_split_its_budget(where, rank, sharers, shared):
    rt = runtime.Runtime(Ranked(rank), None, None, where)
    assert rt.sharers == sharers and rt.shared_devices == shared


@pytest.mark.parametrize("nodes, reads, want", [
    ("0000", True, choice.CMA),  # one node, and the kernel lets the ranks read each other
    ("0000", False, choice.MPI_HOST),  # one node, refused (connect() says None)
    ("0011", True, choice.MPI_HOST),  # two nodes: nobody tries
    ("0", True, choice.MPI_HOST),  # one rank: nothing moves
])
def test_cpu_ranks_read_each_other_only_on_one_node_where_the_kernel_lets_them(
        monkeypatch, nodes, reads, want):
    from mpi4py import MPI

    from distsort.transport import cma

    tried = []

    def connect(comm):
        tried.append(comm)
        return cma.CmaTransport(comm, [0] * len(nodes)) if reads else None

    monkeypatch.setattr(cma, "connect", connect)
    where = Placement(tuple((int(n), f"host{n}") for n in nodes), (None,) * len(nodes))
    assert build.host_transport(MPI.COMM_SELF, where).name == want
    assert bool(tried) == (len(nodes) > 1 and where.one_node)
