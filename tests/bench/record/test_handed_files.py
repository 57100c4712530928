"""Files a variant hands to the harness (``context().file``): logged as artifacts of its MLflow run under
``files/`` and copied into ``--out DIR``'s directory of the variant, through the command as a user runs it
(results spooled, then uploaded)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

BENCH = """
import torch
from bench import context

class B:
    def setup(self):
        ctx = context()
        self.x = torch.arange(64, dtype=torch.float32)
        self.out = torch.empty_like(self.x)
        ctx.file("note.txt").write_text("{side} " + str(ctx.seed))

    def benchmark_fn(self):
        torch.mul(self.x, 2.0, out=self.out)

    def teardown(self):
        pass

    def get_output(self):
        return self.out

def get_benchmark():
    return B()
"""


def test_handed_files_land_in_mlflow_and_in_out(tmp_path: Path) -> None:
    from mlflow import MlflowClient
    from mlflow.artifacts import download_artifacts

    ch = tmp_path / "chapters" / "ch07"
    ch.mkdir(parents=True)
    for side in ("baseline", "optimized"):
        (ch / f"{side}_handed.py").write_text(BENCH.replace("{side}", side))
    uri, out = f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "out"
    # the store made here, a copy of the session's migrated one (tests/session.py), which the command opens: made in
    # the command's process, MLflow would migrate a new one (~3 s of CPU); what the command logs there is the test
    MlflowClient(uri).search_experiments()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")} | {"COLUMNS": "200", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "perflab", "run", "--chapters-dir", str(tmp_path / "chapters"),
                           "-t", "ch07:handed", "--tracking-uri", uri, "--experiment", "files", "--device", "cpu",
                           "--iterations", "3", "--warmup", "1", "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 1: a CPU pair may read no significant difference
    client = MlflowClient(uri)
    runs = client.search_runs(client.get_experiment_by_name("files").experiment_id)
    by_name = {r.info.run_name: r for r in runs}
    for side in ("baseline", "optimized"):
        run = by_name[f"ch07:handed:{side}"]
        assert "files/note.txt" in {a.path for a in client.list_artifacts(run.info.run_id, "files")}
        local = download_artifacts(run_id=run.info.run_id, artifact_path="files/note.txt", tracking_uri=uri,
                                   dst_path=str(tmp_path / "dl" / side))  # fmt: skip
        assert Path(local).read_text() == f"{side} 42"
        assert (out / "ch07" / "handed" / side / "files" / "note.txt").read_text() == f"{side} 42"
