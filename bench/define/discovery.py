"""Discovery of ``chapters/chNN/baseline_<name>.py`` ↔ ``optimized_<name>[_<variant>].py`` and targets.

Targets: ``ch7``, ``7``, ``ch07`` (a chapter), ``ch7:<name>`` (one example), several at once
(comma or space separated), or none (everything). Unknown names are errors that list what exists,
closest match first.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.define.result import VariantSpec
from bench.errors import TargetError

_CHAPTER_DIR_RE = re.compile(r"^ch(\d+)$")
_TARGET_RE = re.compile(r"^(?:ch)?(\d+)(?::([A-Za-z0-9_]+))?$")


def default_chapters_dir() -> Path:
    """``$PERFLAB_CHAPTERS_DIR``, else the ``chapters/`` beside the ``bench`` package, else ``./chapters``."""
    env = os.environ.get("PERFLAB_CHAPTERS_DIR")
    if env:
        return Path(env).resolve()
    beside = Path(__file__).resolve().parents[2] / "chapters"
    return beside if beside.is_dir() else Path.cwd() / "chapters"


def chapter_id(number: int | str) -> str:
    return f"ch{int(number):02d}"


@dataclass
class Example:
    chapter: str
    name: str
    baseline: VariantSpec | None = None
    optimized: list[VariantSpec] = field(default_factory=list)

    @property
    def target(self) -> str:
        return f"{self.chapter}:{self.name}"

    @property
    def variants(self) -> list[VariantSpec]:
        return ([self.baseline] if self.baseline else []) + self.optimized


@dataclass
class Catalog:
    root: Path
    examples: dict[str, Example]  # keyed by "ch07:transpose"
    orphans: list[str] = field(default_factory=list)  # optimized files with no baseline

    @property
    def chapters(self) -> list[str]:
        return sorted({e.chapter for e in self.examples.values()})

    def in_chapter(self, chapter: str) -> list[Example]:
        return [e for k, e in sorted(self.examples.items()) if e.chapter == chapter]

    @property
    def unpaired(self) -> list[str]:
        """Baselines without any optimized partner."""
        return sorted(k for k, e in self.examples.items() if e.baseline and not e.optimized)


def discover(root: str | Path | None = None) -> Catalog:
    root_path = Path(root).resolve() if root is not None else default_chapters_dir()
    if root_path.exists() and not root_path.is_dir():
        raise TargetError(f"chapters directory {str(root_path)!r} is a file, not a directory of chNN/ chapters")
    if not root_path.is_dir():
        raise TargetError(f"chapters directory {str(root_path)!r} does not exist")
    examples: dict[str, Example] = {}
    orphans: list[str] = []
    for chdir in sorted(p for p in root_path.iterdir() if p.is_dir()):
        m = _CHAPTER_DIR_RE.match(chdir.name)
        if not m:
            continue
        chapter = chapter_id(m.group(1))
        baselines = sorted(p.stem[len("baseline_") :] for p in chdir.glob("baseline_*.py"))
        for name in baselines:
            examples[f"{chapter}:{name}"] = Example(
                chapter,
                name,
                baseline=VariantSpec(
                    chapter=chapter, example=name, variant="baseline", path=str(chdir / f"baseline_{name}.py")
                ),
            )
        # Longest baseline name first, so optimized_a_b_c.py pairs with baseline_a_b.py over baseline_a.py.
        by_length = sorted(baselines, key=len, reverse=True)
        for path in sorted(chdir.glob("optimized_*.py")):
            rest = path.stem[len("optimized_") :]
            name = next((b for b in by_length if rest == b or rest.startswith(b + "_")), None)
            if name is None:
                orphans.append(str(path))
                continue
            suffix = rest[len(name) :]
            variant = "optimized" + suffix  # "" or "_<variant>"
            examples[f"{chapter}:{name}"].optimized.append(
                VariantSpec(chapter=chapter, example=name, variant=variant, path=str(path))
            )
    return Catalog(root=root_path, examples=examples, orphans=orphans)


def _closest_first(word: str, choices: Sequence[str]) -> list[str]:
    if not choices:  # nothing to be close to (difflib refuses n=0)
        return []
    close = difflib.get_close_matches(word, choices, n=len(choices), cutoff=0.0)
    return close or sorted(choices)


def split_targets(targets: Iterable[str] | str | None) -> list[str]:
    if targets is None:
        return []
    items = [targets] if isinstance(targets, str) else list(targets)
    return [t for item in items for t in re.split(r"[,\s]+", item.strip()) if t]


def select(catalog: Catalog, targets: Iterable[str] | str | None = None) -> list[Example]:
    """Examples named by ``targets`` (all when empty), in chapter/name order, without duplicates."""
    wanted = split_targets(targets)
    if not wanted:
        return [catalog.examples[k] for k in sorted(catalog.examples)]
    chosen: dict[str, Example] = {}
    for raw in wanted:
        head, sep, tail = raw.partition(":")
        m = _TARGET_RE.match(head.lower() + sep + tail)
        if not m:
            same = sorted(k for k, e in catalog.examples.items() if e.name == raw)  # an example without its chapter
            hint = f" (the example{'s' * (len(same) > 1)} {', '.join(same)}?)" if same else ""
            raise TargetError(f"target {raw!r} is malformed; accepted forms: 'ch7', '7', 'ch07', 'ch7:<example>'{hint}")
        chapter = chapter_id(m.group(1))
        if chapter not in catalog.chapters:
            raise TargetError(
                f"unknown chapter {raw!r}; chapters found under {catalog.root}: "
                + (", ".join(_closest_first(chapter, catalog.chapters)) or "(none)")
            )
        if m.group(2) is None:
            for e in catalog.in_chapter(chapter):
                chosen.setdefault(e.target, e)
            continue
        key = f"{chapter}:{m.group(2)}"
        if key not in catalog.examples:
            names = [e.name for e in catalog.in_chapter(chapter)]
            raise TargetError(
                f"unknown example {raw!r} in {chapter}; examples there: " + ", ".join(_closest_first(m.group(2), names))
            )
        chosen.setdefault(key, catalog.examples[key])
    return [chosen[k] for k in sorted(chosen)]
