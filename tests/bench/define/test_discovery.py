"""bench/define/discovery.py: baseline ↔ optimized pairing and target selection with helpful errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.define.discovery import Catalog, discover, select, split_targets
from bench.errors import TargetError


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    root = tmp_path / "chapters"
    files = [
        "ch07/baseline_x.py",
        "ch07/optimized_x.py",
        "ch07/optimized_x_fast.py",
        "ch07/baseline_y.py",  # no optimized partner
        "ch07/optimized_z.py",  # no baseline
        "ch07/common.py",  # shared helper, not a variant
        "ch1/baseline_w.py",
        "ch1/optimized_w.py",
        "notes/baseline_q.py",  # not a chapter directory
    ]
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
    return discover(root)


def targets(examples: list) -> list[str]:
    return [e.target for e in examples]


def test_pairs_and_variant_names(catalog: Catalog) -> None:
    assert sorted(catalog.examples) == ["ch01:w", "ch07:x", "ch07:y"]
    x = catalog.examples["ch07:x"]
    assert x.baseline is not None and x.baseline.variant == "baseline"
    assert [v.variant for v in x.optimized] == ["optimized", "optimized_fast"]
    assert [Path(v.path).name for v in x.variants] == ["baseline_x.py", "optimized_x.py", "optimized_x_fast.py"]
    assert all(Path(v.path).is_absolute() for v in x.variants)
    assert x.variants[2].key == "ch07:x:optimized_fast"
    assert catalog.chapters == ["ch01", "ch07"]  # ch1 normalised to ch01


def test_unpaired_and_orphans_reported(catalog: Catalog) -> None:
    assert catalog.unpaired == ["ch07:y"]
    assert [Path(p).name for p in catalog.orphans] == ["optimized_z.py"]


def test_longest_baseline_name_wins_pairing(tmp_path: Path) -> None:
    for name in ("baseline_a.py", "baseline_a_b.py", "optimized_a_b.py", "optimized_a_c.py"):
        (tmp_path / "ch02").mkdir(exist_ok=True)
        (tmp_path / "ch02" / name).write_text("")
    cat = discover(tmp_path)
    assert [v.variant for v in cat.examples["ch02:a_b"].optimized] == ["optimized"]
    assert [v.variant for v in cat.examples["ch02:a"].optimized] == ["optimized_c"]


@pytest.mark.parametrize("target", ["ch7", "7", "ch07", "CH7", ["ch7"], "ch07:x ch7"])
def test_chapter_targets(catalog: Catalog, target: str | list[str]) -> None:
    assert targets(select(catalog, target)) == ["ch07:x", "ch07:y"]


def test_example_target(catalog: Catalog) -> None:
    assert targets(select(catalog, "ch7:x")) == ["ch07:x"]


def test_several_targets_sorted_without_duplicates(catalog: Catalog) -> None:
    assert targets(select(catalog, "ch7:x,ch1")) == ["ch01:w", "ch07:x"]
    assert targets(select(catalog, ["ch7:x", "ch1:w,ch7:x"])) == ["ch01:w", "ch07:x"]


@pytest.mark.parametrize("none", [None, "", [], " , "])
def test_no_target_means_all(catalog: Catalog, none: object) -> None:
    assert targets(select(catalog, none)) == ["ch01:w", "ch07:x", "ch07:y"]  # type: ignore[arg-type]


def test_unknown_chapter_lists_chapters_closest_first(catalog: Catalog) -> None:
    with pytest.raises(TargetError) as info:
        select(catalog, "ch17")
    message = str(info.value)
    assert "'ch17'" in message
    # ch07 is closer to ch17 than ch01 although it sorts after it
    assert message.index("ch07") < message.index("ch01")


def test_unknown_example_lists_examples_closest_first(catalog: Catalog) -> None:
    with pytest.raises(TargetError) as info:
        select(catalog, "ch7:yy")
    message = str(info.value)
    assert "'ch7:yy'" in message and "ch07" in message
    tail = message.split("examples there:")[1]
    assert [s.strip() for s in tail.split(",")] == ["y", "x"]


def test_a_target_in_a_directory_of_no_chapters_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    # difflib refused to pick 0 close matches: ValueError, exit status 1 and a traceback for a user's typo
    (tmp_path / "ch07").mkdir()
    with pytest.raises(TargetError, match=r"unknown chapter 'ch9'.*: \(none\)"):
        select(discover(tmp_path), "ch9")


@pytest.mark.parametrize("bad", ["chapter7", "ch7:", "ch7:x:y", "ch:x", "x", "ch7:a-b"])
def test_malformed_target_rejected(catalog: Catalog, bad: str) -> None:
    with pytest.raises(TargetError, match="malformed"):
        select(catalog, bad)


def test_an_example_named_without_its_chapter_is_pointed_to(catalog: Catalog) -> None:
    with pytest.raises(TargetError, match=r"'x' is malformed; accepted forms: .* \(the example ch07:x\?\)$"):
        select(catalog, "x")
    with pytest.raises(TargetError) as info:
        select(catalog, "nothere")
    assert "the example" not in str(info.value)


def test_split_targets() -> None:
    assert split_targets("ch7, ch1:w  3") == ["ch7", "ch1:w", "3"]
    assert split_targets(None) == []


def test_missing_chapters_dir(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="does not exist"):
        discover(tmp_path / "nowhere")


def test_chapters_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("")
    with pytest.raises(TargetError, match="is a file, not a directory"):
        discover(tmp_path / "notes.md")


def test_default_chapters_dir_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ch03").mkdir()
    (tmp_path / "ch03" / "baseline_v.py").write_text("")
    monkeypatch.setenv("PERFLAB_CHAPTERS_DIR", str(tmp_path))
    assert list(discover().examples) == ["ch03:v"]
