"""Text for a terminal of a given width (the console's: ``COLUMNS``, 80 off a terminal), never cut mid-number or
mid-path: a report's Markdown keeps its file form (``--out``, MLflow), and the terminal gets it fitted.

* ``wrapped``: one line of prose word-wrapped with a hanging indent; a word wider than the line (a path, a URI)
  stays whole on a line of its own, and a figure keeps its unit (``12.0 s``, ``2.3 %``) on its line.
* ``fit_tables``: each Markdown table wider than the width redrawn to fit: a cell's words wrap within its column;
  a column of dashes only is left out; a table of at most three rows of figures (a word a cell beside the
  first column's names) is turned on its side, a row per column; otherwise a last column left too little room
  (a diagnosis, a note) goes under the table, one line per row.
* ``for_terminal``: a Markdown report as the terminal shows it: tables fitted, prose lines and list items wrapped,
  code blocks as they are.
"""

from __future__ import annotations

import re
import textwrap

__all__ = ["fit_tables", "for_terminal", "wrapped"]

_GLUE = "\0"  # a space no line breaks at: between a figure and its unit
_UNIT = re.compile(r"(?<=\d) (?=(?:s|ms|us|µs|ns|%|×|x|GB/s|GB|MB|GiB|MiB|KiB|B)(?![\w/]))")
_ITEM = re.compile(r"( *)([-*+] |\d+\. |# |)")  # a list item's or a YAML comment's mark


def _width(width: int | None) -> int:
    if width is not None:
        return width
    from bench.cli.output import console

    return console.width


def wrapped(text: str, width: int | None = None, hang: int = 4) -> str:
    """``text`` (one line) on lines of at most ``width`` (default the console's) characters, broken between words
    only: the lines after the first indented ``hang`` beyond the first's own indent. A word wider than the line
    stays whole (a path or URI is never cut); a figure stays beside its unit."""
    width = _width(width)
    indent = " " * (len(text) - len(text.lstrip(" ")))
    if len(text) <= width:
        return text
    glued = _UNIT.sub(_GLUE, text.strip(" "))
    lines = textwrap.wrap(glued, width=max(width, 20), initial_indent=indent, subsequent_indent=indent + " " * hang,
                          break_long_words=False, break_on_hyphens=False)  # fmt: skip
    return "\n".join(line.replace(_GLUE, " ") for line in lines)


def _cells(line: str) -> list[str]:
    inner = line.strip().removeprefix("|").removesuffix("|")
    return [c.strip().replace("\0", "|") for c in inner.replace("\\|", "\0").split("|")]


def _widths(headers: list[str], rows: list[list[str]], width: int) -> list[int] | None:
    """Column widths within ``width`` (two spaces between columns): each column at least its longest word, the
    room left to the columns that wrap, narrowest need first; None when the longest words alone do not fit."""
    cols = [[h, *(r[i] for r in rows)] for i, h in enumerate(headers)]
    natural = [max(len(c) for c in col) for col in cols]
    out = [max(len(w) for c in col for w in c.split() or [""]) for col in cols]
    room = width - 2 * (len(headers) - 1) - sum(out)
    if room < 0:
        return None
    for i in sorted(range(len(out)), key=lambda i: natural[i] - out[i]):
        give = min(room, natural[i] - out[i])
        out[i] += give
        room -= give
    return out


def _draw(headers: list[str], rows: list[list[str]], right: list[bool], widths: list[int]) -> list[str]:
    def draw(cells: list[str]) -> list[str]:
        wrapped = [textwrap.wrap(c, w, break_long_words=False, break_on_hyphens=False) or [""]
                   for c, w in zip(cells, widths, strict=True)]  # fmt: skip
        return ["  ".join((p[k] if k < len(p) else "").rjust(w) if r else (p[k] if k < len(p) else "").ljust(w)
                          for p, w, r in zip(wrapped, widths, right, strict=True)).rstrip()
                for k in range(max(map(len, wrapped)))]  # fmt: skip

    return [*draw(headers), "  ".join("-" * w for w in widths), *(x for r in rows for x in draw(r))]


def _table(lines: list[str], width: int) -> list[str]:
    headers, rules, rows = _cells(lines[0]), _cells(lines[1]), [_cells(x) for x in lines[2:]]
    rows = [(r + [""] * len(headers))[: len(headers)] for r in rows]
    keep = [i for i in range(len(headers)) if any(r[i] not in ("—", "") for r in rows)]  # a column of dashes: none
    headers, rules, rows = [headers[i] for i in keep], [rules[i] for i in keep], [[r[i] for i in keep] for r in rows]
    headers = [h.replace("_", " ") for h in headers]
    right = [rule.endswith(":") for rule in rules]
    if 1 <= len(rows) <= 3 and not any(" " in c for r in rows for c in r[1:]):  # a few rows of figures: turned
        sideways = [[headers[i], *(r[i] for r in rows)] for i in range(1, len(headers))]
        widths = _widths([headers[0], *(r[0] for r in rows)], sideways, width)
        if widths is not None:
            return _draw([headers[0], *(r[0] for r in rows)], sideways, [False, *[True] * len(rows)], widths)
    below: list[str] = []
    while len(headers) > 2 and (
        (widths := _widths(headers, rows, width)) is None
        or widths[-1]
        < min(
            24,
            max(len(r[-1]) for r in rows),  # a last column of a few characters a line reads as a list of words
        )
    ):
        below = [wrapped(f"{headers[0]} {r[0]}, {headers[-1]}: {r[-1]}", width) for r in rows if r[-1]] + below
        headers, right, rows = headers[:-1], right[:-1], [r[:-1] for r in rows]
    widths = _widths(headers, rows, width)
    if widths is None:
        return lines
    return [*_draw(headers, rows, right, widths), *below]


def _is_table(block: list[str]) -> bool:
    return len(block) >= 2 and not block[1].replace("|", "").replace("-", "").replace(":", "").strip()


def fit_tables(markdown: str, width: int) -> str:
    """``markdown`` with every table (a header line, a ``|---|`` rule, rows) wider than ``width`` redrawn to fit."""
    lines, out, i = markdown.split("\n"), [], 0
    while i < len(lines):
        j = i
        while j < len(lines) and lines[j].startswith("|"):
            j += 1
        block = lines[i:j]
        out += _table(block, width) if _is_table(block) and any(len(x) > width for x in block) else block
        if j < len(lines):
            out.append(lines[j])
        i = j + 1
    return "\n".join(out)


def for_terminal(markdown: str, width: int | None = None) -> str:
    """``markdown`` as the terminal shows it (``width``: default the console's): its tables fitted, each prose line
    wrapped between words (a list item's lines under its text, a YAML comment's behind ``#``), code blocks and
    lines that fit as they are."""
    width = _width(width)
    out, fenced = [], False
    for line in fit_tables(markdown, width).split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced or len(line) <= width or line.startswith("|"):
            out.append(line)
            continue
        indent, sign = _ITEM.match(line).groups()  # type: ignore[union-attr]  # every part optional: it matches
        if sign == "# ":  # a comment: each of its lines one
            body = wrapped(line[len(indent) + 2 :], width - len(indent) - 2, hang=0)
            out += [f"{indent}# {x}" for x in body.split("\n")]
        else:
            out.append(wrapped(line, width, hang=len(sign) or 4))
    return "\n".join(out)
