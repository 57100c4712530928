"""sweeps/space.py and the config's space: one configuration per meaning, pinning only on a GPU, the baseline."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.errors import ConfigError
from sweeps.config import DEFAULT_CONFIG, SweepConfig, load_sweep_config, parse_baseline
from sweeps.space import PARAMS, Space, key


def test_loader_knobs_collapse_without_workers_and_accumulation_must_divide() -> None:
    cfg = SweepConfig(batch_sizes=[6, 8], num_workers_options=[0, 2], test_mixed_precision=False,
                      test_pin_memory=False, grad_accum_options=[1, 4], prefetch_factor_options=[2, 4],
                      test_persistent_workers=True)  # fmt: skip
    space = cfg.space()
    points = space.points()
    assert len({key(p) for p in points}) == len(points)
    # 0 workers: prefetch/persistence mean nothing → one point per (batch, accum); 2 workers: 2 x 2 of them
    zero = [p for p in points if p["num_workers"] == 0]
    assert {(p["prefetch_factor"], p["persistent_workers"]) for p in zero} == {(2, False)}
    # batch 6 with grad_accum 4 is no configuration (6 micro-batches of 1.5 samples)
    assert not any(p["batch_size"] == 6 and p["grad_accum"] == 4 for p in points)
    assert cfg.grid_size() == len(points) == 3 * 1 + 3 * 4  # (6,1) (8,1) (8,4) x (0 workers: 1, 2 workers: 4)
    assert space.canonical({**points[0], "grad_accum": 4, "batch_size": 6}) is None
    assert space.varied() == ["batch_size", "num_workers", "grad_accum", "prefetch_factor", "persistent_workers"]


def test_pinning_is_never_in_a_cpu_space() -> None:
    cfg = SweepConfig(test_pin_memory=True)
    assert cfg.space(cuda=True).values["pin_memory"] == [False, True]
    assert cfg.space(cuda=False).values["pin_memory"] == [False]
    assert all(not p["pin_memory"] for p in cfg.space(cuda=False).points())
    with pytest.raises(ConfigError, match="pinning exists only for a GPU"):
        SweepConfig(baseline={"batch_size": 32, "num_workers": 0, "pin_memory": True}).baseline_params(cuda=False)


def test_base_climbs_with_the_fast_settings() -> None:
    cfg = SweepConfig(num_workers_options=[0, 4, 12], test_channels_last=True, test_compile=True,
                      grad_accum_options=[1, 2])  # fmt: skip
    assert cfg.space().base() == {"num_workers": 12, "amp": True, "pin_memory": True, "grad_accum": 1,
                                  "channels_last": True, "compile": False, "prefetch_factor": 2,
                                  "persistent_workers": True}  # fmt: skip


def test_baseline_flag_and_defaults() -> None:
    assert parse_baseline("batch_size=64, num_workers=2,amp=TRUE") == {"batch_size": 64, "num_workers": 2, "amp": True}
    cfg = load_sweep_config(None, baseline="batch_size=64,num_workers=2,grad_accum=2")
    assert cfg.baseline_params() == {"batch_size": 64, "num_workers": 2, "amp": False, "pin_memory": False,
                                     "grad_accum": 2, "channels_last": False, "compile": False,
                                     "prefetch_factor": 2, "persistent_workers": True}  # fmt: skip
    seed_default = SweepConfig().baseline_params()  # the seed's: batch 32, 0 workers, fp32
    assert (seed_default["batch_size"], seed_default["num_workers"], seed_default["amp"]) == (32, 0, False)
    for bad, match in (("bs=64", "not NAME=VALUE with NAME one of"), ("batch_size=big", "expected an integer")):
        with pytest.raises(ConfigError, match=match) as err:
            parse_baseline(bad)
        assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="not a multiple of grad_accum 4"):
        SweepConfig(baseline={"batch_size": 30, "num_workers": 0, "grad_accum": 4}).baseline_params()


def test_config_errors_are_one_line_and_preset_is_a_workload(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError) as err:
        load_sweep_config(None, steps_per_test=0, batch_sizes="32,x")
    assert "\n" not in str(err.value) and "--batch-sizes '32,x'" in str(err.value)
    with pytest.raises(ConfigError) as err:
        load_sweep_config(None, steps_per_test=0)
    assert "\n" not in str(err.value) and "steps_per_test" in str(err.value) and "(got 0)" in str(err.value)
    (tmp_path / "old.yaml").write_text("benchmark:\n  preset: small\n")
    assert load_sweep_config(tmp_path / "old.yaml").workload == "small"
    assert load_sweep_config(tmp_path / "old.yaml", preset="tiny").workload == "tiny"  # the CLI's layer wins


def test_from_space_round_trip() -> None:
    cfg = SweepConfig(test_channels_last=True, grad_accum_options=[1, 2], test_persistent_workers=True)
    values = cfg.space().values
    back = SweepConfig.from_space(values)
    assert back.space().values == values and len(PARAMS) == len(values)
    with pytest.raises(ConfigError, match="cannot be a sweep's space"):
        SweepConfig.from_space({**values, "amp": [True]})
    assert Space(values).size() == cfg.grid_size()


def test_a_typo_key_names_the_close_one_and_the_accepted_keys(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "typo.yaml").write_text("benchmark:\n  batch_size: [32, 64]\n")
    with pytest.raises(ConfigError) as err:
        load_sweep_config(tmp_path / "typo.yaml")
    text = str(err.value)
    assert "\n" not in text and "unknown key 'batch_size'; did you mean 'batch_sizes'?" in text, text
    assert "accepted: " in text and "num_workers_options" in text and "Extra inputs" not in text, text


@pytest.mark.parametrize("sizes", [[32, -64], [0, 32]])
def test_a_bad_batch_size_says_its_value_once_and_one_bound(sizes: list[int]) -> None:
    with pytest.raises(ConfigError) as err:
        load_sweep_config(None, batch_sizes=sizes)
    text = str(err.value)
    assert text == f"invalid sweep config: batch_sizes: values must be >= 1 (got {sizes})", text
    with pytest.raises(ConfigError, match=r"num_workers_options: values must be >= 0 \(got \[-1\]\)$"):
        load_sweep_config(None, num_workers_options=[-1])


def test_a_grad_accum_that_divides_no_batch_size_is_refused_up_front() -> None:
    with pytest.raises(ConfigError) as err:
        load_sweep_config(None, grad_accum_options="3", batch_sizes="32,64")
    text = str(err.value)
    assert "\n" not in text and "grad_accum 3 divides none of the batch sizes [32, 64]" in text, text
    some = load_sweep_config(None, grad_accum_options="1,3", batch_sizes="6,32,64")  # 3 divides 6: runs, with a note
    assert some.left_out() == "left out (the batch is not a multiple of grad_accum): grad_accum 3 with batch 32, 64"
    assert load_sweep_config(None, grad_accum_options="1,2", batch_sizes="32,64").left_out() is None


@pytest.mark.parametrize(("text", "said"), [
    ("benchmark:\n  batch_sizes: [32, 64\n", "while parsing a flow sequence at line 2, column 16: expected ',' or ']', "
                                          "but got '<stream end>' at line 3, column 1"),
    ("import torch\n\ndef make():\n    pass\n", "mapping values are not allowed here at line 3, column 11"),
    (b"\xea\x01\x02SQLite", "'utf-8' codec can't decode byte 0xea"),
    ("benchmark: \x01\n", "unacceptable character #x0001: special characters are not allowed at character 12"),
])  # fmt: skip
def test_a_config_that_is_not_yaml_is_one_line_naming_the_file_and_where(tmp_path: Path, text: str | bytes,
                                                                         said: str) -> None:  # fmt: skip
    """A YAML typo, a job file or a binary file given as --config: the parser's complaint with its line and column,
    not PyYAML's traceback."""
    p = tmp_path / "cfg.yaml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError) as err:
        load_sweep_config(p)
    assert str(err.value).startswith(f"sweep config {str(p)!r} is not valid YAML: ") and said in str(err.value)
    assert str(err.value).endswith(f"; expected a top-level 'benchmark:' mapping (see {DEFAULT_CONFIG})")
    assert "\n" not in str(err.value) and "<unicode string>" not in str(err.value)


def test_a_bad_strategy_is_one_line_before_the_trial_server_starts() -> None:
    import time

    from typer.testing import CliRunner

    from perflab.cli import app

    start = time.monotonic()
    out = CliRunner().invoke(app, ["sweep", "run", "--strategy", "random", "--no-track"], env={"COLUMNS": "80"})
    assert isinstance(out.exception, ConfigError), out.output  # perflab's entry point: one line, exit status 2
    assert str(out.exception) == "--strategy 'random': accepted: grid, smart, pareto"
    assert "trial server" not in out.output and time.monotonic() - start < 10.0, out.output
