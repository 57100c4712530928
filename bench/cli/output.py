"""Where the commands print: the consoles, errors on one line, and progress for long work.

* Text from names, paths and messages is data: it goes through ``rich.text.Text`` or ``markup=False``, so
  "[L2 flush]" is printed, not swallowed as a markup tag; no emoji codes either (``ch07:x:baseline`` would
  otherwise print as ``ch07❌baseline``).
* An error is one line (``soft_wrap``): a terminal wraps it at its edge, a log file keeps it whole, and no
  phrase is ever broken by our own wrapping.
* A table wider than the console keeps its figures whole and wraps its names (``fitted``): rich's own
  squeezing cuts every column at once, names into "ch07:aos…"; a name wraps after a colon or a space
  (``name_lines``), not at whichever character reaches the column's edge.
* Long work (a suite, a sweep, the kernel cases) shows rich's progress bar on a terminal, with each step's
  line printed above it; elsewhere (a pipe, a CI log) the same lines, each counted ``3/16``, and no bar.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

__all__ = [
    "Report",
    "can_write_in",
    "console",
    "err_console",
    "error",
    "fitted",
    "name_lines",
    "new_console",
    "progress",
    "warning",
    "writable_dir",
]


def new_console(**options: bool) -> Console:
    """A console of rich's, its width the terminal's, else ``COLUMNS``, else 80; ``COLUMNS=0`` (a container started
    without a terminal size, ``COLUMNS=$(tput cols)`` off one) read as unset: rich would print nothing at all."""
    made = Console(emoji=False, **options)
    if made.width < 1:
        made.width = 80
    return made


console = new_console()
err_console = new_console(stderr=True, soft_wrap=True)

# report(line, advance=1): print a step's line (None: none) and count ``advance`` steps done
Report = Callable[..., None]


def error(message: str) -> None:
    """``error: <message>`` on stderr, on one line."""
    err_console.print(Text.assemble(("error:", "red"), " ", message))


def warning(message: str) -> None:
    """``warning: <message>`` on stderr, on one line."""
    err_console.print(Text.assemble(("warning:", "yellow"), " ", message))


def writable_dir(path: Path, option: str) -> Path:
    """``path`` checked before a command measures anything it would then have nowhere to put: a directory there, or
    one that can be made, that takes a file; a PerflabError naming ``option``, the path and why otherwise. Nothing is
    left behind: the command makes the directory when it writes there, and a refusal leaves no directory made."""
    from bench.errors import PerflabError

    if path.exists() and not path.is_dir():
        raise PerflabError(f"{option} {str(path)!r}: a file, not a directory; pass a writable directory")
    reason = can_write_in(path)
    if reason:
        raise PerflabError(f"{option} {str(path)!r}: cannot write there ({reason}); pass a writable directory")
    return path


def can_write_in(directory: Path) -> str | None:
    """None when ``directory`` exists, or can be made with its parents, and a file can be created in it; else why not,
    naming the file in the way or the directory that could not be made where it is not ``directory`` itself. A real
    probe (a permission check says yes to root in a read-only or virtual file system), undone: the directories it
    made are removed again."""
    import tempfile

    made: list[Path] = []
    at = directory
    try:
        for at in [*reversed(directory.parents), directory]:
            if not at.is_dir():
                try:
                    at.mkdir()
                except FileExistsError:
                    if not at.is_dir():  # a file where a directory would go (a directory made meanwhile is fine)
                        return f"{at} is a file"
                    continue
                made.append(at)
        at = directory
        with tempfile.TemporaryFile(dir=directory, prefix=".perflab-probe-"):
            return None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return reason if at == directory else f"{at}: {reason}"
    finally:
        for d in reversed(made):
            with contextlib.suppress(OSError):  # another process's files in it meanwhile: it stays
                d.rmdir()


@contextlib.contextmanager
def progress(what: str, total: int | None, out: Console | None = None) -> Iterator[Report]:
    """Count ``total`` steps of ``what``: yields ``report(line, advance=1)``. On a terminal a rich progress bar
    (removed when done) with the lines above it; otherwise each step's line prefixed with the steps done so far
    (``advance=0``: a line between steps, indented alike). Anything else printed to ``out`` meanwhile shows above
    the bar."""
    out = out or console
    if not out.is_terminal:
        done = 0

        def plain(line: str | Text | None = None, advance: int = 1) -> None:
            nonlocal done
            done += advance
            if line is not None:  # a step's line says how many are done; a line between steps is indented alike
                count = (f"{done}/{total}" if total else str(done)) if advance else ""
                out.print(Text.assemble((f"{count:>7} ", "dim"), line), soft_wrap=True, markup=False)

        yield plain
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=out, transient=True) as bar:
        task = bar.add_task(what, total=total)

        def live(line: str | Text | None = None, advance: int = 1) -> None:
            if line is not None:
                bar.console.print(line, soft_wrap=True, markup=False)
            bar.advance(task, advance)

        yield live


def fitted(headers: list[str], rows: list[list[str]], width: int, narrow: dict[int, int]) -> list[int | None]:
    """Column widths for a table of ``width`` characters (three spaces between columns, none at the edges):
    None each (rich's natural widths) when it fits; else each column in ``narrow`` at that width (header words
    on two lines; a cell's words wrap) or its longest word (a cell's or the header's), never wider than its widest
    cell, the others at their widest cell, and column 0 (the names) what is left, at least 10; names that would
    wrap take room from the narrow columns first, down to each one's longest word."""
    natural = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    gaps = 3 * (len(headers) - 1)  # rich.box.SIMPLE_HEAD: a padding space, the rule, a padding space
    if sum(natural) + gaps <= width:
        return [None] * len(headers)
    word = {i: max(len(w) for r in [headers, *rows] for w in r[i].split()) for i in narrow}
    fixed = [min(natural[i], max(narrow[i], word[i])) if i in narrow else natural[i] for i in range(len(headers))]
    short = natural[0] - (width - gaps - sum(fixed[1:]))  # what the names lack: the narrow columns give it up
    for i in sorted(narrow, key=lambda i: fixed[i] - word[i], reverse=True):
        give = min(max(short, 0), fixed[i] - min(natural[i], word[i]))
        fixed[i] -= give
        short -= give
    fixed[0] = max(10, min(natural[0], width - gaps - sum(fixed[1:])))
    return list(fixed)


def name_lines(name: str, width: int | None) -> str:
    """``name`` (``ch07:example:variant``, ``example (variant)``) on lines of at most ``width`` characters, broken
    after a colon or a space, and within a part still too wide after an underscore or a hyphen, in lines as even as
    they can be: rich breaks a word without spaces at whichever character reaches the column's edge
    (``fp8_training:optimized_te`` / ``nsorwise``).
    A piece wider than ``width`` is left for rich to fold; ``width`` None (a table that fits): unchanged."""
    if width is None or len(name) <= width:
        return name
    lines = [piece for line in _packed(name, r"(?<=[: ])", width)
             for piece in (_balanced(line, width) if len(line) > width else [line])]  # fmt: skip
    return "\n".join(lines)


def _balanced(part: str, width: int) -> list[str]:
    """``part`` (one word of a name) broken after its underscores and hyphens into the fewest lines of at most
    ``width``, as even as those allow, an earlier break where two are alike: ``(optimized_`` / ``plain_mm_fast_gb)``,
    not ``(optimized_plain_mm_fast_`` / ``gb)``. A piece wider than ``width`` stays whole on a line of its own."""
    pieces = [p for p in re.split(r"(?<=[_-])", part) if p]
    # best[i]: (lines, longest line, the start of the last line) for the first i pieces
    best: list[tuple[int, int, int]] = [(0, 0, 0)] + [(len(pieces) + 1, 0, 0)] * len(pieces)
    for i in range(1, len(pieces) + 1):
        for j in range(i):
            size = sum(map(len, pieces[j:i]))
            if size > width and i - j > 1:
                continue
            lines, longest, _ = best[j]
            candidate = (lines + 1, max(longest, size), j)
            if candidate[:2] < best[i][:2]:
                best[i] = candidate
    breaks, i = [], len(pieces)
    while i > 0:
        breaks.append(i)
        i = best[i][2]
    starts = [0, *reversed(breaks)]
    return ["".join(pieces[a:b]) for a, b in zip(starts, starts[1:], strict=False)]


def _packed(text: str, after: str, width: int) -> list[str]:
    """``text`` split after each match of ``after``, the pieces joined into lines of at most ``width`` where they
    fit, each line without its trailing space."""
    lines = [""]
    for piece in re.split(after, text):
        if lines[-1] and len(lines[-1]) + len(piece.rstrip()) > width:  # the space between them counts
            lines.append("")
        lines[-1] += piece
    return [line.rstrip() for line in lines]
