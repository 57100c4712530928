"""recommendation.md as the terminal shows it: each Markdown table wider than the terminal redrawn to its width
(a cell's words wrap within its column; a last column left too little room, such as the diagnosis, goes
under the table as one line per row). recommendation.md keeps the Markdown."""

from __future__ import annotations

__all__ = ["fit_tables", "for_terminal"]


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


def _table(lines: list[str], width: int) -> list[str]:
    import textwrap

    headers, rules, rows = _cells(lines[0]), _cells(lines[1]), [_cells(x) for x in lines[2:]]
    rows = [(r + [""] * len(headers))[: len(headers)] for r in rows]
    keep = [i for i in range(len(headers)) if any(r[i] not in ("—", "") for r in rows)]  # a column of dashes: none
    headers, rules, rows = [headers[i] for i in keep], [rules[i] for i in keep], [[r[i] for i in keep] for r in rows]
    headers = [h.replace("_", " ") for h in headers]
    below: list[str] = []
    while len(headers) > 2 and ((widths := _widths(headers, rows, width)) is None or widths[-1] < min(
        24, max(len(r[-1]) for r in rows)  # a last column of a few characters a line reads as a list of words
    )):
        below = [f"{headers[0]} {r[0]}, {headers[-1]}: {r[-1]}" for r in rows] + below
        headers, rules, rows = headers[:-1], rules[:-1], [r[:-1] for r in rows]
    widths = _widths(headers, rows, width)
    if widths is None:
        return lines
    right = [rule.endswith(":") for rule in rules]

    def draw(cells: list[str]) -> list[str]:
        wrapped = [textwrap.wrap(c, w) or [""] for c, w in zip(cells, widths, strict=True)]
        return ["  ".join((p[k] if k < len(p) else "").rjust(w) if r else (p[k] if k < len(p) else "").ljust(w)
                          for p, w, r in zip(wrapped, widths, right, strict=True)).rstrip()
                for k in range(max(map(len, wrapped)))]  # fmt: skip

    return [*draw(headers), "  ".join("-" * w for w in widths), *(x for r in rows for x in draw(r)), *below]


def fit_tables(markdown: str, width: int) -> str:
    """``markdown`` with every table (a header line, a ``|---|`` rule, rows) wider than ``width`` redrawn to fit."""
    lines, out, i = markdown.split("\n"), [], 0
    while i < len(lines):
        j = i
        while j < len(lines) and lines[j].startswith("|"):
            j += 1
        block = lines[i:j]
        table = len(block) >= 2 and not block[1].replace("|", "").replace("-", "").replace(":", "").strip()
        out += _table(block, width) if table and any(len(x) > width for x in block) else block
        if j < len(lines):
            out.append(lines[j])
        i = j + 1
    return "\n".join(out)


def for_terminal(markdown: str) -> str:
    """``markdown`` with its tables fitted to the terminal's width (``COLUMNS``; 80 off a terminal)."""
    from bench.cli import console

    return fit_tables(markdown, console.width)
