"""Free text (a benchmark's error message, a verification's reason) made safe for the files CI systems read: a JUnit
XML that an XML 1.0 parser takes, and Markdown (a GitHub step summary) whose tables keep their cells."""

from __future__ import annotations

import re

__all__ = ["markdown_text", "plain_text"]

# a terminal's escape sequences (colours, cursor moves: CSI ... final byte, or ESC and one byte)
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])")
# what XML 1.0 does not allow in a document (and DEL, C1): a parser stops at the first, taking the file with it
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
# Markdown's punctuation that would make a table's cell end (|), an HTML tag a renderer drops (<), or emphasis and
# code out of an identifier (__init__, *args, `x`); a backslash first, so that an escape in the text stays text
_MARKDOWN = re.compile(r"([\\|<>*_`\[\]])")


def plain_text(text: str) -> str:
    """``text`` without terminal escape sequences and characters XML 1.0 forbids (tabs and newlines kept)."""
    return _CONTROL.sub("", _ANSI.sub("", text))


def markdown_text(text: str, limit: int | None = None) -> str:
    """``text`` as one line of Markdown that reads as written inside a table's cell or a list item: plain, its
    whitespace runs one space, cut to ``limit`` characters (``…`` where cut) before its punctuation is escaped."""
    one = " ".join(plain_text(text).split())
    if limit is not None and len(one) > limit:
        one = one[: limit - 1].rstrip() + "…"
    return _MARKDOWN.sub(r"\\\1", one)
