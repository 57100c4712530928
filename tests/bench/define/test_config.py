"""bench/define/config.py: one source of defaults, layering where only explicit fields win, errors that name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.define.config import BenchmarkConfig, benchmark_layer, load_config_file, resolve_config
from bench.errors import ConfigError, PerflabError


def test_defaults() -> None:
    c = resolve_config()
    assert c.setup_timeout_seconds == 30.0
    assert c.warmup_timeout_seconds == 15.0
    assert c.measurement_timeout_seconds == 15.0
    assert c.profiling_timeout_seconds == 180.0
    assert c.timeout_multiplier == 1.0
    assert c.device == "auto"
    assert c.poison_outputs is True
    assert c.rtol is None  # the dtype's tolerance, never a blanket one
    assert c.percentiles == [25.0, 50.0, 75.0, 90.0, 95.0, 99.0]


def test_layers_later_wins() -> None:
    suite = {"iterations": 10, "warmup": 3, "seed": 1}
    own = BenchmarkConfig(iterations=20, seed=2)
    cli = {"iterations": 40}
    c = resolve_config(suite, own, cli)
    assert c.iterations == 40  # CLI over get_config()
    assert c.seed == 2  # get_config() over suite
    assert c.warmup == 3  # suite over defaults


def test_model_layer_only_overrides_fields_it_sets() -> None:
    # BenchmarkConfig(iterations=5) carries warmup=5 as a default; it must not reset warmup=11.
    c = resolve_config({"warmup": 11, "device": "cpu"}, BenchmarkConfig(iterations=5))
    assert (c.iterations, c.warmup, c.device) == (5, 11, "cpu")


def test_resolved_config_used_as_layer_keeps_only_explicit_fields() -> None:
    inner = resolve_config({"warmup": 7})
    c = resolve_config({"seed": 9, "warmup": 1}, inner)
    assert (c.seed, c.warmup) == (9, 7)


def test_none_layers_are_skipped() -> None:
    assert resolve_config(None, {"iterations": 3}, None).iterations == 3


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("iterations", 0),
        ("warmup", -1),
        ("device", "tpu"),
        ("device", "cuda:x"),
        ("timeout_multiplier", -1),
        ("setup_timeout_seconds", 0),
        ("timing_mode", "wallclock"),
        ("percentiles", [50.0, 101.0]),
        ("rtol", 2.0),
    ],
)
def test_invalid_value_names_field_and_value(field: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_config({field: value})
    message = str(info.value)
    assert field in message
    assert repr(value) in message or str(value) in message
    assert message.count(f"{field}=") == 1 and "Value error" not in message  # the value named once, in our words


def test_world_size_is_bounded_and_places_rank_r_on_cuda_r() -> None:
    assert resolve_config().world_size == 1
    assert resolve_config({"world_size": 4, "device": "cuda"}).world_size == 4
    for bad in (0, 65):
        with pytest.raises(ConfigError, match=f"world_size={bad}"):
            resolve_config({"world_size": bad})
    # a fixed GPU cannot hold every rank: the error names the device and the fix
    with pytest.raises(ConfigError, match="device='cuda:1' with world_size=2.*rank r runs on cuda:r"):
        resolve_config({"world_size": 2, "device": "cuda:1"})


def test_gpus_of_one_process_are_bounded_and_not_ranks_too() -> None:
    assert resolve_config().gpus == 1 and resolve_config({"gpus": 2}).gpus == 2
    with pytest.raises(ConfigError, match="gpus=0"):
        resolve_config({"gpus": 0})
    with pytest.raises(ConfigError, match="world_size=2 with gpus=2: either ranks of one GPU each"):
        resolve_config({"world_size": 2, "gpus": 2})


def test_config_error_is_a_perflab_error_and_a_value_error() -> None:
    with pytest.raises(PerflabError):
        resolve_config({"iterations": 0})
    with pytest.raises(ValueError):
        resolve_config({"iterations": 0})


def test_unknown_field_is_named_and_accepted_fields_listed() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_config({"iterations": 3, "itertions": 5})
    message = str(info.value)
    assert "itertions" in message
    assert "iterations" in message and "warmup" in message  # what is accepted


def test_bad_layer_type_rejected() -> None:
    with pytest.raises(ConfigError, match="list"):
        resolve_config([("iterations", 3)])  # type: ignore[arg-type]


def test_a_stage_limits_field_is_the_one_its_limit_comes_from() -> None:
    """A timeout's message names the field to raise: the one whose value is the stage's limit."""
    from bench.define.config import limit_field

    c = BenchmarkConfig(
        setup_timeout_seconds=11.0,
        measurement_timeout_seconds=13.0,
        warmup_timeout_seconds=1.0,
        first_call_timeout_seconds=17.0,
        startup_timeout_seconds=19.0,
        profiling_timeout_seconds=23.0,
    )
    for stage in ("startup", "setup", "warmup", "first_call", "measurement", "profiling", "check", "batch", "recheck",
                  "teardown"):  # fmt: skip
        assert c.stage_limit(stage) == getattr(c, limit_field(stage)), stage


def test_stage_limit_multiplies_by_timeout_multiplier() -> None:
    c = resolve_config({"setup_timeout_seconds": 4, "warmup_timeout_seconds": 3, "timeout_multiplier": 2.5})
    assert c.stage_limit("setup") == pytest.approx(10.0)
    assert c.stage_limit("warmup") == pytest.approx(7.5)
    assert c.stage_limit("measurement") == pytest.approx(15.0 * 2.5)
    assert c.stage_limit("profiling") == pytest.approx(180.0 * 2.5)
    # check and teardown are bounded by the setup limit
    assert c.stage_limit("check") == c.stage_limit("teardown") == pytest.approx(10.0)


def test_stages_after_the_measurement_allow_a_slow_call_its_calls() -> None:
    """A 4.5 s call's batch (up to 9 call-times) would pass the measurement's 15 s: once the call's time is known, the
    check, batch and recheck are allowed STAGE_CALLS of it; the others, and fast calls, keep their limits."""
    from bench.define.config import STAGE_CALLS

    c = resolve_config({"timeout_multiplier": 2.0})
    assert c.stage_limit("batch", 4.5) == pytest.approx(STAGE_CALLS["batch"] * 4.5 * 2.0)
    assert c.stage_limit("batch", 4.5) > c.stage_limit("batch")
    assert c.stage_limit("check", 4.5) == pytest.approx(STAGE_CALLS["check"] * 4.5 * 2.0)
    assert c.stage_limit("recheck", 4.5) > c.stage_limit("recheck")
    assert c.stage_limit("measurement", 4.5) == c.stage_limit("measurement") == pytest.approx(30.0)
    assert c.stage_limit("batch", 0.001) == c.stage_limit("batch")


def test_the_parent_scales_a_later_stages_limit_with_the_measured_call() -> None:
    from bench.define.result import VariantSpec
    from bench.isolate.outcome import Watch

    spec = VariantSpec(chapter="ch07", example="a", variant="baseline", path="x.py")
    watch = Watch(spec, resolve_config())
    watch.handle({"t": "stage", "name": "batch", "event": "start"})
    assert watch.limit() == pytest.approx(15.0)  # before a timing: the configured limit
    watch.handle({"t": "timing", "samples_ms": [4400.0, 4500.0, 4700.0]})
    assert watch.limit() == pytest.approx(12 * 4.5)
    # the warm-up's limit scales with the first call, known before any other: three calls of 6 s pass 15 s
    early = Watch(spec, resolve_config())
    early.handle({"t": "stage", "name": "warmup", "event": "start"})
    early.handle({"t": "first_call", "ms": 6000.0})
    assert early.limit() == pytest.approx(6 * 6.0)


def test_a_first_call_has_its_own_limit_until_it_returns() -> None:
    """The warm-up's first call compiles (torch.compile of a two-layer MLP: 18 s from a cold cache on a 2-core host,
    past the warm-up's 15 s): until it returns, the warm-up is allowed first_call_timeout_seconds (at least its
    own limit); after, its own, scaled with the first call. A parked child's later round compiles nothing."""
    from bench.define.result import VariantSpec
    from bench.isolate.outcome import Watch

    spec = VariantSpec(chapter="ch07", example="a", variant="baseline", path="x.py")
    watch = Watch(spec, resolve_config({"timeout_multiplier": 2.0}))
    watch.handle({"t": "stage", "name": "warmup", "event": "start"})
    assert watch.limit() == pytest.approx(120.0 * 2.0)
    watch.handle({"t": "first_call", "ms": 100.0})
    assert watch.limit() == pytest.approx(15.0 * 2.0)
    assert resolve_config({"warmup_timeout_seconds": 200.0}).stage_limit("first_call") == pytest.approx(200.0)
    resumed = Watch(spec, resolve_config())
    resumed.resumed = True
    resumed.handle({"t": "stage", "name": "warmup", "event": "start"})
    assert resumed.limit() == pytest.approx(15.0)


def test_stage_limit_unknown_stage() -> None:
    with pytest.raises(ConfigError, match="'compile'"):
        resolve_config().stage_limit("compile")


@pytest.mark.parametrize(
    ("suffix", "text"),
    [
        (".json", json.dumps({"iterations": 12, "device": "cpu"})),
        (".yaml", "iterations: 12\ndevice: cpu\n"),
        (".yml", "iterations: 12\ndevice: cpu\n"),
        (".toml", 'iterations = 12\ndevice = "cpu"\n'),
    ],
)
def test_load_config_file(tmp_path: Path, suffix: str, text: str) -> None:
    path = tmp_path / f"suite{suffix}"
    path.write_text(text)
    layer = load_config_file(path)
    assert layer == {"iterations": 12, "device": "cpu"}
    c = resolve_config(layer, {"warmup": 2})
    assert (c.iterations, c.device, c.warmup) == (12, "cpu", 2)


def test_load_config_file_missing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config_file(tmp_path / "nope.yaml")


def test_load_config_file_bad_suffix(tmp_path: Path) -> None:
    path = tmp_path / "suite.ini"
    path.write_text("iterations=3\n")
    with pytest.raises(ConfigError, match=r"'\.ini'"):
        load_config_file(path)


def test_load_config_file_unknown_field(tmp_path: Path) -> None:
    path = tmp_path / "suite.json"
    path.write_text(json.dumps({"iteratons": 3}))
    with pytest.raises(ConfigError, match="iteratons"):
        load_config_file(path)


@pytest.mark.parametrize(("suffix", "text", "kind"), [
    (".yaml", "iterations: [unclosed\n", "YAML"), (".toml", "iterations = \n", "TOML"),
    (".json", '{"iterations": 3,', "JSON"), (".json", b"\xff\xfe{", "JSON"),
])  # fmt: skip
def test_load_config_file_malformed_is_one_line_naming_the_file(
    tmp_path: Path, suffix: str, text: str | bytes, kind: str
) -> None:
    """A file its parser refuses was a parser's traceback (`perflab run --config`), naming neither file nor format."""
    path = tmp_path / f"suite{suffix}"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError, match=rf"^config file {re.escape(repr(str(path)))} is not valid {kind}: \S") as err:
        load_config_file(path)
    assert "\n" not in str(err.value) and "<unicode string>" not in str(err.value)
    assert str(err.value).endswith("; expected a mapping of BenchmarkConfig fields, such as 'iterations: 20' (.json, "
                                   ".yaml, .yml, .toml)")  # fmt: skip
    if kind != "JSON" or isinstance(text, str):  # every parser's refusal says where, as an editor counts
        assert re.search(r"line \d+, column \d+", str(err.value)), err.value


def test_load_config_file_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text("- iterations\n- 3\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config_file(path)


def test_perflab_rounds_fixes_the_rounds_where_no_layer_sets_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PERFLAB_ROUNDS", raising=False)
    assert (resolve_config().min_rounds, resolve_config().max_rounds) == (3, 8)
    monkeypatch.setenv("PERFLAB_ROUNDS", "2")
    assert (resolve_config().min_rounds, resolve_config().max_rounds) == (2, 2)
    assert resolve_config({"min_rounds": 4}).max_rounds == 8  # a layer that sets either: the defaults for the other
    for bad in ("0", "two", "101"):
        monkeypatch.setenv("PERFLAB_ROUNDS", bad)
        with pytest.raises(ConfigError, match=f"PERFLAB_ROUNDS='{bad}' is invalid: a whole number"):
            resolve_config()


def test_perflab_rounds_overrides_a_benchmarks_own_rounds_not_the_suites(monkeypatch: pytest.MonkeyPatch) -> None:
    from chapters.ch15.common import serving_config

    own = serving_config()  # the serving chapters pick five rounds of their own
    monkeypatch.delenv("PERFLAB_ROUNDS", raising=False)
    assert resolve_config(None, benchmark_layer(own)).min_rounds == 5
    assert resolve_config(None, benchmark_layer(own)).max_measure_seconds == 4.0
    monkeypatch.setenv("PERFLAB_ROUNDS", "1")  # a smoke check: every pair in one round, these too
    resolved = resolve_config(None, benchmark_layer(own))
    assert (resolved.min_rounds, resolved.max_rounds, resolved.max_measure_seconds) == (1, 1, 4.0)
    assert resolve_config({"min_rounds": 4}, benchmark_layer(own)).min_rounds == 4  # the suite's config still wins
    assert resolve_config(None, benchmark_layer(own), {"max_rounds": 6}).max_rounds == 6  # and a flag


def test_one_end_of_the_rounds_set_later_moves_the_other_end_an_earlier_layer_left() -> None:
    def rounds(*layers: dict) -> tuple[int, int]:
        c = resolve_config(*layers)
        return c.min_rounds, c.max_rounds

    assert rounds({"max_rounds": 2}) == (2, 2)  # below the default's 3
    assert rounds({"min_rounds": 5}, {"max_rounds": 4}) == (4, 4)  # a flag under a benchmark's own five
    assert rounds({"max_rounds": 3}, {"min_rounds": 6}) == (6, 6)
    assert rounds({"min_rounds": 5}, {"max_rounds": 6}) == (5, 6)  # no conflict: nothing moves
    with pytest.raises(ConfigError, match="min_rounds=5 is above max_rounds=4"):
        resolve_config({"min_rounds": 5, "max_rounds": 4})  # both ends in one layer: its own mistake
    with pytest.raises(ConfigError, match="max_rounds='x'"):
        resolve_config({"min_rounds": 5}, {"max_rounds": "x"})
    with pytest.raises(ConfigError, match="min_rounds='x'"):
        resolve_config({"min_rounds": "x"}, {"max_rounds": 4})


def test_perflab_min_warmup_seconds_sets_the_floor_where_no_layer_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PERFLAB_MIN_WARMUP_SECONDS", raising=False)
    assert resolve_config().min_warmup_seconds is None  # the clock's own floor
    monkeypatch.setenv("PERFLAB_MIN_WARMUP_SECONDS", "0.05")
    assert resolve_config().min_warmup_seconds == 0.05
    assert resolve_config({"min_warmup_seconds": 1.5}).min_warmup_seconds == 1.5  # a layer that sets it wins
    assert resolve_config({"min_rounds": 4}).min_warmup_seconds == 0.05  # the rounds' layer leaves it alone
    for bad in ("-1", "soon", "61", "nan"):
        monkeypatch.setenv("PERFLAB_MIN_WARMUP_SECONDS", bad)
        with pytest.raises(ConfigError, match=f"PERFLAB_MIN_WARMUP_SECONDS='{bad}' is invalid: seconds from 0"):
            resolve_config()
