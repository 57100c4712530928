"""sweeps/data.py: the HDF5 layout make-data writes, and the errors on bad files."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

from perflab.cli import app
from sweeps.data import DataError, H5Batches, check_data, make_data


def test_make_data_cli_writes_features_and_labels(tmp_path: Path) -> None:
    path = tmp_path / "d.h5"
    result = CliRunner().invoke(app, ["sweep", "make-data", str(path), "--samples", "3000", "--features", "16"])
    assert result.exit_code == 0, result.output
    with h5py.File(path, "r") as f:
        x, y = f["features"][:], f["labels"][:]
    assert x.shape == (3000, 16) and x.dtype == np.float32
    assert y.shape == (3000,) and y.dtype == np.int64
    assert np.count_nonzero(x) == x.size and abs(float(x.mean())) < 0.1 and 0.9 < float(x.std()) < 1.1
    assert set(np.unique(y)) <= set(range(10)) and len(np.unique(y)) > 5  # labels carry information
    assert check_data(path).samples == 3000


def test_same_seed_same_data_and_batches_are_contiguous(tmp_path: Path) -> None:
    a, b = make_data(tmp_path / "a.h5", 500, 8, seed=3), make_data(tmp_path / "b.h5", 500, 8, seed=3)
    with h5py.File(a.path, "r") as fa, h5py.File(b.path, "r") as fb:
        assert np.array_equal(fa["features"][:], fb["features"][:])
        rows = fa["features"][100:150]
    data = H5Batches(a.path, batch_size=50)
    assert len(data) == 10
    x, y = data[2]
    assert x.shape == (50, 8) and np.array_equal(x.numpy(), rows)


F4, L4 = np.ones((4, 2), np.float32), np.ones(4, np.int64)


def _write(path: Path, **datasets: np.ndarray) -> Path:
    with h5py.File(path, "w") as f:
        for name, value in datasets.items():
            f.create_dataset(name, data=value)
    return path


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda p: p / "missing.h5", "does not exist"),
        (lambda p: (p / "text.h5").write_text("not hdf5") and p / "text.h5", "not a readable HDF5"),
        (lambda p: _write(p / "nolabels.h5", features=F4), r"lacks dataset\(s\) \['labels'\]"),
        (lambda p: _write(p / "empty.h5", features=F4[:0], labels=L4[:0]), "empty"),
        (lambda p: _write(p / "rows.h5", features=F4, labels=L4[:3]), "4 feature rows but 3"),
        (lambda p: _write(p / "flat.h5", features=F4[:, 0], labels=L4), r"features \(N, F\)"),
    ],
)  # fmt: skip
def test_bad_files_name_the_problem(tmp_path: Path, make, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DataError, match=match):
        check_data(make(tmp_path))


def test_run_with_missing_data_path_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["sweep", "run", "--data-path", str(tmp_path / "nope.h5"), "--no-track"])
    assert result.exit_code != 0
    assert isinstance(result.exception, DataError) and "make-data" in str(result.exception)


def _write_slowly(path: str, marks: str) -> None:
    import os
    import time

    from sweeps.runner import _write_once

    def make(p: Path) -> None:
        (Path(marks) / str(os.getpid())).touch()
        time.sleep(0.5)  # long enough for the other workers to arrive while it writes
        make_data(p, 100, 4)

    _write_once(Path(path), make, lambda _: None)
    check_data(path)  # every worker finds the file whole: HDF5 would refuse one being written


def test_workers_started_together_write_built_in_data_once(tmp_path: Path) -> None:
    import multiprocessing

    marks = tmp_path / "marks"
    marks.mkdir()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_write_slowly, args=(str(tmp_path / "d.h5"), str(marks))) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert len(list(marks.iterdir())) == 1 and not list(tmp_path.glob(".d.h5.*"))
