"""Progress bars on rank 0's stderr (progress.py): when they show, and what the file job shows."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from distsort import progress
from distsort.cli import main
from distsort.io import staging

COMM = MPI.COMM_SELF


class Rank:
    def __init__(self, rank: int):
        self.rank = rank

    def Get_rank(self) -> int:  # noqa: N802 (MPI's name)
        return self.rank


@pytest.fixture(autouse=True)
def decided_by_terminal():
    progress.configure(None)
    yield
    progress.configure(None)


@pytest.mark.parametrize("wanted, env, rank, shown", [
    (None, None, 0, False),  # under pytest stderr is no terminal
    (None, "1", 0, True),  # the launcher's terminal (quickstart.sh)
    (True, None, 0, True), (False, "1", 0, False),  # --progress, --quiet
    (True, "1", 1, False),  # rank 0 only
])
def test_progress_shows_where_wanted_on_rank_0_only(monkeypatch, wanted, env, rank, shown):
    if env is None:
        monkeypatch.delenv("DISTSORT_PROGRESS", raising=False)
    else:
        monkeypatch.setenv("DISTSORT_PROGRESS", env)
    progress.configure(wanted)
    assert progress.shown(Rank(rank)) == shown


@pytest.mark.parametrize("flags, bars", [(["--progress"], True), (["--progress", "--quiet"], False),
                                         ([], False)])
def test_the_file_job_shows_reading_and_writing(tmp_path, monkeypatch, capfd, flags, bars):
    pytest.importorskip("tqdm")
    monkeypatch.delenv("DISTSORT_PROGRESS", raising=False)
    monkeypatch.setattr(progress, "DELAY", 0)
    monkeypatch.setattr(staging, "STAGE_BYTES", 1 << 12)  # many pieces
    np.save(tmp_path / "in.npy", np.arange(5000, dtype=np.uint32)[::-1])
    code = main(["sort", str(tmp_path / "in.npy"), "-o", str(tmp_path / "out.npy"),
                 "--backend", "cpu", *flags])
    err = capfd.readouterr().err
    assert code == 0 and np.array_equal(np.load(tmp_path / "out.npy"), np.arange(5000))
    for step in ("distsort: read", "distsort: write out.npy"):
        assert (step in err) == bars, err
    if bars:
        assert err.count("/19.5k") >= 2  # of 20000 bytes (KiB), read and written


def test_a_watched_bar_tells_where_its_step_is_on_rank_0_only():
    """progress.watched (the service's status): rank 0's bars report their step as it starts
    and advances, whether or not the bar shows; other ranks' do not."""
    seen: list = []
    with progress.watched(seen.append):
        with progress.Bar(Rank(0), "read in.npy", 100) as bar:
            bar.add(40)
            bar.add(60)
        progress.Bar(Rank(1), "read in.npy", 100).add(100)
    progress.Bar(Rank(0), "write out.npy", 10).add(10)  # no longer watched
    assert seen == [{"step": "read in.npy", "done": d, "total": 100, "unit": "B"}
                    for d in (0, 40, 100)]
