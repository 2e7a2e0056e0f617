"""Which transport the GPU runtime takes between ranks ($DISTSORT_TRANSPORT; runtime.py), with the
transports faked: NCCL, or the copy engines where every rank can map every other's memory."""

from __future__ import annotations

import pytest

from distsort import runtime
from distsort.errors import DistsortError
from distsort.exchange import ipc, nccl


class Comm:
    def __init__(self, size: int):
        self.size = size

    def Get_size(self) -> int:
        return self.size


@pytest.fixture
def fake_transports(monkeypatch):
    monkeypatch.setattr(nccl, "NcclTransport", lambda comm: "nccl")
    monkeypatch.setattr(ipc, "connect", lambda comm, small: "ipc")


@pytest.mark.parametrize("setting, ranks, want", [
    (None, 2, "ipc"), (None, 3, "nccl"), (None, 4, "nccl"), ("auto", 2, "ipc"),
    ("auto", 8, "nccl"), ("ipc", 4, "ipc"), ("nccl", 2, "nccl"),
])
def test_copy_engines_by_default_on_two_ranks_only(monkeypatch, fake_transports, setting, ranks,
                                                   want):
    if setting is None:
        monkeypatch.delenv("DISTSORT_TRANSPORT", raising=False)
    else:
        monkeypatch.setenv("DISTSORT_TRANSPORT", setting)
    assert runtime.gpu_transport(Comm(ranks)) == want


def test_an_unknown_transport_is_named_in_the_error(monkeypatch, fake_transports):
    monkeypatch.setenv("DISTSORT_TRANSPORT", "tcp")
    with pytest.raises(DistsortError, match="'tcp': choose one of auto, ipc, nccl"):
        runtime.gpu_transport(Comm(2))
