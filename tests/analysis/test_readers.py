"""What every reader of the store (show, report, compare, regressions, expectations check) says of a suite that is
not whole or not a suite: one stopped before all its variants ran (``--suite-timeout``, Ctrl-C) is said so, the
variants that did not finish named, so its table, counts and geomean are not taken for the whole suite's; a run
that is no perflab suite is refused in one line."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

import analysis.cli
from bench.record.tracking import Tracker
from perflab import cli
from tests.analysis.synthetic import Store, draw, pair, result

LEFT = ["ch07:b:baseline", "ch07:b:optimized"]


@pytest.fixture(scope="module")
def suites(store: Store) -> dict[str, str]:
    store.experiment("cut")
    ids = {}
    for name, examples, summary in (("whole", "ab", {}), ("cut", "a", {"suite_status": "timeout",
                                                                       "not_finished": LEFT})):  # fmt: skip
        with Tracker(experiment="cut", tracking_uri=store.uri, run_name=f"ch07 {name}") as t:
            for i, ex in enumerate(examples):
                base = result(f"ch07:{ex}:baseline", draw(0.002, 2 * i), gpu=None)
                opt = result(f"ch07:{ex}:optimized", draw(0.001, 2 * i + 1), gpu=None)
                t.log_variant(base, None)
                t.log_variant(opt, pair(base, opt))
            t.finish("# synthetic\n", summary, interrupted=bool(summary))
        ids[name] = t.parent_run_id
    return ids


@pytest.mark.parametrize("command", ["show", "report", "regressions", "compare", "expectations"])
def test_every_reader_names_the_variants_a_cut_suite_did_not_run(
    command: str, suites: dict[str, str], store: Store, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(analysis.cli.console, "width", 80)
    cut, uri = suites["cut"], ["--tracking-uri", store.uri]
    args = {"show": ["show", "--run-id", cut], "report": ["report", "--run-id", cut, "--no-log", "--out",
                                                           str(tmp_path)],
            "regressions": ["regressions", "--run-id", cut],
            "compare": ["compare", suites["whole"], cut],
            "expectations": ["expectations", "check", "--run-id", cut, "--no-log", "--out", str(tmp_path),
                             "--dir", str(tmp_path)]}[command]  # fmt: skip
    out = CliRunner().invoke(cli.app, [*args, *uri])
    assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    text = " ".join(out.output.split())
    side = "B: " if command == "compare" else ""
    assert f"{side}suite {cut} ended at its --suite-timeout" in text, out.output
    assert "2 did not: ch07:b:baseline, ch07:b:optimized" in text, out.output
    if command != "show":  # show's lines are Markdown; the others' sentences wrap at the console's width
        assert all(len(line) <= 80 for line in out.output.splitlines() if not line.startswith("wrote ")), out.output


def test_a_whole_suite_gets_no_such_line(suites: dict[str, str], store: Store) -> None:
    out = CliRunner().invoke(cli.app, ["show", "--run-id", suites["whole"], "--tracking-uri", store.uri])
    assert out.exit_code == 0 and "did not" not in out.output and "--suite-timeout" not in out.output


@pytest.mark.parametrize("command", ["report", "regressions", "expectations"])
def test_the_sentences_under_a_readers_table_fit_80_columns(
    command: str, suites: dict[str, str], store: Store, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counts and notes (``1/2 variants ok; ...; geomean speedup of ...``, a variant's ``no previous ok run of
    ... with torch ...``, an expectation's row) ran to 90-160 columns in an 80-column pipe: they wrap between
    words, as ``compare``'s do; a path written stays whole on its own line."""
    monkeypatch.setattr(analysis.cli.console, "width", 80)
    whole = suites["whole"]
    args = {
        "report": ["report", "--no-log", "--out", str(tmp_path)],
        "regressions": ["regressions"],
        "expectations": ["expectations", "check", "--no-log", "--out", str(tmp_path), "--dir", str(tmp_path)],
    }
    out = CliRunner().invoke(cli.app, [*args[command], "--run-id", whole, "--tracking-uri", store.uri])
    assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    lines = out.output.splitlines()
    assert all(len(line) <= 80 for line in lines if not line.startswith("wrote ")), out.output
    assert any(line.startswith(("suite ", "run ")) or "variants ok;" in line for line in lines), out.output


@pytest.mark.parametrize("command", ["show", "report", "regressions", "compare", "compare-metrics", "expectations",
                                     "readme"])  # fmt: skip
def test_a_run_that_is_no_perflab_suite_is_refused_in_one_line(
    command: str, suites: dict[str, str], store: Store, tmp_path: Any
) -> None:
    """An MLflow run of the user's own (a training run in the same store) given by id: report wrote an empty
    report, compare "0 pair(s) in both suites" and expectations "0 pass ... 0 needs-work", each exit status 0."""
    experiment = store.client.get_experiment_by_name("cut").experiment_id
    mine, whole = store.client.create_run(experiment, run_name="my training").info.run_id, suites["whole"]
    store.client.log_metric(mine, "loss", 0.5)
    store.client.set_terminated(mine)
    written = tmp_path / "out"
    args = {"show": ["show", "--run-id", mine], "report": ["report", "--run-id", mine, "--no-log", "--out",
                                                           str(written)],
            "regressions": ["regressions", "--run-id", mine], "compare": ["compare", whole, mine],
            "compare-metrics": ["compare", mine, whole, "--metrics"],
            "expectations": ["expectations", "check", "--run-id", mine, "--no-log", "--out", str(written), "--dir",
                             str(tmp_path)],
            "readme": ["readme", "--check", "--run-id", mine]}[command]  # fmt: skip
    out = CliRunner().invoke(cli.app, [*args, "--tracking-uri", store.uri])
    said = out.output if isinstance(out.exception, SystemExit) else f"error: {out.exception}"  # show: PerflabError
    assert out.exit_code != 0 and said.startswith("error: ") and len(said.strip().splitlines()) == 1, said
    assert mine in said and ("not a" in said or "neither" in said), said
    assert not written.exists()


@pytest.mark.parametrize("command", ["show", "report", "regressions"])
def test_a_suite_still_being_written_is_said_to_be_so(
    command: str, store: Store, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A suite another process is still logging (its parent RUNNING, no ``perflab.suite_status`` yet) read by id:
    its first pairs were tabulated, counted and geomeaned as if they were the suite."""
    monkeypatch.setattr(analysis.cli.console, "width", 80)
    store.experiment(f"live-{command}")
    t = Tracker(experiment=f"live-{command}", tracking_uri=store.uri, run_name="ch07 live")
    t.start()
    base, opt = result("ch07:a:baseline", draw(0.002, 1), gpu=None), result("ch07:a:optimized", draw(0.001, 2))
    t.log_variant(base, None)
    t.log_variant(opt, pair(base, opt))
    args = {"show": ["show"], "report": ["report", "--no-log", "--out", str(tmp_path)],
            "regressions": ["regressions"]}[command]  # fmt: skip
    out = CliRunner().invoke(cli.app, [*args, "--run-id", t.parent_run_id, "--tracking-uri", store.uri])
    assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    said = " ".join(out.output.split())
    assert f"suite {t.parent_run_id} has not ended" in said and "only the variants logged so far" in said, said
