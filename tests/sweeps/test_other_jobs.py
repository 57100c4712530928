"""Users' jobs of the other kinds, swept on the CPU as they were written (tests/sweeps/fixtures/):

* ``jpeg_folder.py``: a small CNN on a folder of JPEG/PNG files, decoded with PIL and randomly cropped and
  flipped on the host per item, its own collate_fn;
* ``token_stream.py``: a tiny transformer on random windows of an ``np.memmap`` token file, served by an
  ``IterableDataset`` (no ``__len__``): a tiny step, the loader's per-sample work dominating.

Each gets a recommendation, the bottleneck with both ceilings and a verification against the plain
default. Then what else users bring — items that are dicts or carry extras, a loader of their own, model
inputs by keyword — either trains or stops with one line saying what the sweep needs.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from sweeps.api import TrialSettings
from sweeps.measure import TrialJob, measure
from sweeps.runner import sweep
from sweeps.workload import WorkloadError, parse_workload
from tests.session import slow_for
from tests.sweeps.fixtures import jpeg_folder, token_stream

FIXTURES = Path(__file__).parent / "fixtures"
SCRIPT = Path(__file__).parents[2] / "scripts" / "sweep_compare.py"
_spec = importlib.util.spec_from_file_location("sweep_compare", SCRIPT)
assert _spec is not None and _spec.loader is not None
sweep_compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep_compare)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("jobs")
    jpeg_folder.write(str(d / "images"), samples=96, side=40)
    token_stream.write(str(d / "train.bin"), samples=400)
    return {"jpeg_folder": str(d / "images"), "token_stream": str(d / "train.bin")}


# jpeg_folder in the full tier: its sweep is ~15 s on the loaded 2-core host; token_stream keeps the fast tier's
@pytest.mark.parametrize("job", slow_for(["jpeg_folder", "token_stream"], {"jpeg_folder"}))
def test_each_job_gets_a_recommendation_its_bottleneck_and_a_verification(
    job: str, data: dict[str, str], tmp_path: Path
) -> None:
    said: list[str] = []
    overrides = {"workload": f"{FIXTURES / job}.py:make", "batch_sizes": "16", "num_workers_options": "0 2",
                 "steps_per_test": 3, "warmup_steps": 1, "device": "cpu", "test_mixed_precision": False,
                 "rank_rounds": 0, "probe_seconds": 0.2, "verify_repeats": 2, "remeasure_seconds": 0}  # fmt: skip
    result = sweep(data_path=data[job], strategy="grid", storage=f"sqlite:///{tmp_path / 'o.db'}",
                   out=tmp_path / "out", overrides=overrides, echo=said.append, track=False)  # fmt: skip
    trials = [line for line in said if line.startswith("trial ") and " -> " in line]
    assert len(trials) == 2 and all("-> ok" in line for line in trials), said  # 0 and 2 workers both train
    rec, c = result.recommendation, result.conclusion
    assert rec.recommended is not None and rec.recommended["batch_size"] == 16
    # the bottleneck: the data path alone (0 workers and the host's ladder) and the step alone, in numbers
    head = c["headline"]
    assert head.startswith("the data path") and "; the step" in head, head
    numbers = c["bottleneck"]
    assert numbers["data_samples_per_s"] > 0 and numbers["step_samples_per_s"] > 0
    md = (tmp_path / "out" / "recommendation.md").read_text()
    assert "- data path alone (samples/s by workers, no model): 0: " in md and "Bound: " in md
    # verified against the plain default: batch 32, 0 workers, fp32, no pinning; 2 + 2 fresh runs
    v = result.verification
    assert v is not None and len(v.baseline.samples_per_s) == 2 and len(v.recommended.samples_per_s) == 2
    assert v.baseline.params["batch_size"] == 32 and v.baseline.params["num_workers"] == 0
    assert v.low is not None and v.high is not None and v.low <= v.speedup <= v.high
    assert "**speedup** (recommended / baseline)" in md
    # conclusion.json: the recommendation's re-measured throughput, as the GPU step compares two sweeps by it
    again = json.loads((tmp_path / "out" / "conclusion.json").read_text())["remeasured"]
    assert again["verified"]["runs"] == v.recommended.samples_per_s and again["verified"]["mean"] == v.recommended.mean
    text, ok = sweep_compare.line(tmp_path / "out", tmp_path / "out", job, 0.05)
    assert ok and text.endswith("ratio 1.000: within 5%") and f"{v.recommended.mean:,.0f}" in text, text


def _job(tmp_path: Path, body: str, batch_size: int = 8, name: str = "job") -> TrialJob:
    f = tmp_path / f"{name}.py"
    f.write_text("import torch\nfrom torch import nn\nfrom sweeps.api import Workload\n\n" + body)
    s = TrialSettings(batch_size=batch_size, num_workers=0, pin_memory=False, amp=False, device="cpu", smoke=True)
    return TrialJob(workload=asdict(parse_workload(f"{f}:make")), settings=asdict(s), steps=2, warmup_steps=1)


MAKE = """
class Items(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        x = torch.randn(4)
        return {ITEM}


def make(s):
    model = nn.Linear(4, 3)
    return Workload(model=model, optimizer=torch.optim.SGD(model.parameters(), 0.1), loss_fn=nn.CrossEntropyLoss(),
                    dataset=Items())
"""


@pytest.mark.parametrize(
    ("item", "parts"),
    [
        ("{'image': x, 'label': i % 3}", ("a batch is a dict with keys ['image', 'label']",)),
        ("x, i % 3, f'file{i}.png'", ("a batch is a list of 3: (Tensor(8, 4), Tensor(8,), tuple of 8: (str, ",)),
        ("x", ("a batch is a Tensor(8, 4)",)),
    ],
)
def test_items_that_are_not_input_target_pairs_stop_with_one_line(tmp_path: Path, item: str,
                                                                   parts: tuple[str, ...]) -> None:  # fmt: skip
    job = _job(tmp_path, MAKE.replace("{ITEM}", item), name=f"item{abs(hash(item))}")
    with pytest.raises(WorkloadError) as err:
        measure(job)
    text = str(err.value)
    assert "\n" not in text and "the sweep needs (inputs, target) pairs" in text, text
    assert all(p in text for p in parts), text


def test_a_loader_of_the_users_own_must_follow_the_trials_batch(tmp_path: Path) -> None:
    body = MAKE.replace("{ITEM}", "x, i % 3").replace(
        "dataset=Items())", "loader=lambda: torch.utils.data.DataLoader(Items(), batch_size=5, shuffle=True))"
    )
    with pytest.raises(WorkloadError) as err:
        measure(_job(tmp_path, body))
    assert "has no dimension of 8, the trial's micro-batch size" in str(err.value)
    assert "batch_size=settings.micro_batch_size" in str(err.value)
    ok = body.replace("batch_size=5", "batch_size=s.micro_batch_size")  # the same loader, following the trial
    assert measure(_job(tmp_path, ok, name="ok"))["samples_per_s"] > 0


def test_model_inputs_by_keyword_in_any_order(tmp_path: Path) -> None:
    body = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, mask, features):  # the dict below names them in another order
        return self.lin(features * mask)


def make(s):
    model = Net()
    items = [({"features": torch.randn(4), "mask": torch.ones(4)}, i % 3) for i in range(32)]
    return Workload(loss_fn=nn.CrossEntropyLoss(), dataset=items, model=model,
                    optimizer=torch.optim.SGD(model.parameters(), 0.1))
"""
    m = measure(_job(tmp_path, body))
    assert m["samples_per_s"] > 0 and m["final_loss"] is not None


@pytest.mark.parametrize(
    ("dataset", "part"),
    [
        ("(b for b in [])", "dataset is a generator, neither map-style (__getitem__ and __len__) nor a torch.utils"),
        ("NoLen()", "dataset NoLen has __getitem__ but no __len__"),
        ("[]", "dataset list is empty"),
    ],
)
def test_datasets_the_loader_cannot_read_stop_with_one_line(tmp_path: Path, dataset: str, part: str) -> None:
    body = f"""
class NoLen:
    def __getitem__(self, i):
        return torch.randn(4), 0


def make(s):
    model = nn.Linear(4, 3)
    return Workload(model=model, optimizer=torch.optim.SGD(model.parameters(), 0.1), loss_fn=nn.CrossEntropyLoss(),
                    dataset={dataset})
"""
    with pytest.raises(WorkloadError) as err:
        measure(_job(tmp_path, body, name=f"ds{abs(hash(dataset))}"))
    assert "\n" not in str(err.value) and part in str(err.value), str(err.value)


def _concluded(d: Path, config: str, verified: list[float] | None, ranking: list[float]) -> Path:
    import statistics

    again: dict = {"configuration": config, "ranking": {"mean": statistics.mean(ranking), "low": min(ranking),
                                                        "high": max(ranking), "runs": ranking}}  # fmt: skip
    if verified:
        again["verified"] = {"mean": statistics.mean(verified), "low": min(verified), "high": max(verified),
                             "runs": verified}  # fmt: skip
    d.mkdir()
    (d / "conclusion.json").write_text(json.dumps({"recommended": {"batch_size": 128}, "speedup": [7.7, 6.8, 8.8],
                                                   "remeasured": again}))  # fmt: skip
    return d


def test_two_sweeps_compare_in_one_line(tmp_path: Path) -> None:
    a = _concluded(tmp_path / "a", "bs=128 w=16 amp pin", [8000.0, 8200.0], [7000.0])
    b = _concluded(tmp_path / "b", "bs=128 w=12 amp pin", [8400.0, 8600.0], [9000.0])
    text, ok = sweep_compare.line(a, b, "h5 swept twice", 0.05)
    assert ok and "\n" not in text
    assert text.startswith("h5 swept twice: a bs=128 w=16 amp pin / b bs=128 w=12 amp pin; re-measured samples/s ")
    assert "8,100 [8,000, 8,200] (2 runs) / 8,500 [8,400, 8,600] (2 runs) (verification runs)" in text
    assert text.endswith("ratio 1.049: within 5%")  # 8,500 / 8,100
    text, _ = sweep_compare.line(a, b, "h5", 0.04)
    assert text.endswith("ratio 1.049: NOT within 4%")
    c = _concluded(tmp_path / "c", "bs=64 w=16 amp pin", None, [8100.0, 8300.0])  # not verified: the ranking's runs
    assert "(verification runs / ranking runs); ratio 1.012" in sweep_compare.line(a, c, "x", 0.05)[0]
    text, ok = sweep_compare.line(a, tmp_path / "missing", "x", 0.05)
    assert not ok and "no conclusion.json (the sweep did not finish)" in text and text.endswith("no ratio")
    assert sweep_compare.same(a, a, "pair") == ("pair: the same conclusion in both — bs=128 w=16 amp pin, speedup "
                                                "7.70x [6.80, 8.80]", True)  # fmt: skip
    text, ok = sweep_compare.same(a, b, "pair")
    assert not ok and text.startswith("pair: DIFFERENT conclusions (remeasured differ)")


def test_a_remeasure_times_at_least_its_seconds_past_the_steps(tmp_path: Path) -> None:
    """Ranking rounds and verification repeats (``remeasure_seconds``): a window of 2 steps at the trial's
    batch is far shorter than asked, so the steps go on until the time is reached, or 100x the steps (the cap);
    the throughput counts every step that was timed."""
    job = _job(tmp_path, MAKE.replace("{ITEM}", "x, i % 3"), name="longer")
    short = measure(job)
    assert short["measured_steps"] == 2
    longer = measure(replace(job, min_seconds=0.05))
    timed = longer["step_ms"] * longer["measured_steps"]
    assert longer["measured_steps"] > 2, longer
    assert timed >= 50 * 0.99 or longer["measured_steps"] == 200, longer
    assert longer["samples_per_s"] == pytest.approx(8e3 / longer["step_ms"])
    capped = measure(replace(job, min_seconds=3600.0))  # a tiny step: the cap ends it, not the hour
    assert capped["measured_steps"] == 200
