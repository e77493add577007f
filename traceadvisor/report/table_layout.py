"""Column widths of the reports' fixed-layout tables (the analyze and compare HTML): short columns keep their
width in ``ch``, long ones share the rest and end in an ellipsis."""

from __future__ import annotations

PAD_CHARS = 3  # a cell's padding (8 px a side) and border, in characters
SHORT_CHARS = 16  # a column whose cells and header words are all this short keeps its full width
FIXED_BUDGET_CHARS = 120  # short columns' widths summed beyond this: every column shares by proportion


def _chars(text: str) -> int:
    """Width of ``text`` in ``ch`` (the width of "0"): capitals are wider (MEM001 was cut to "MEM..." at 6)."""
    return len(text) + (sum(map(str.isupper, text)) + 2) // 3


def column_widths(headers: list[str], columns: list[list[str]], hi: int = 36) -> list[str | None]:
    """CSS widths of a fixed-layout table that fits its card: short columns (numbers, ids, flags) keep
    their full width in ``ch``; longer ones share what is left (``None``: auto) and their long cells end in an
    ellipsis with the full text in their title. When even the short columns do not fit, every column gets a
    share in % proportional to its content."""
    want = []
    for h, cells in zip(headers, columns, strict=True):
        words = max((_chars(w) for w in str(h).split()), default=0)
        want.append(max(words, 3, *(_chars(str(c)) for c in cells)))
    short = [w <= SHORT_CHARS for w in want]
    if sum(w + PAD_CHARS for w, sh in zip(want, short, strict=True) if sh) <= FIXED_BUDGET_CHARS:
        return [f"{w + PAD_CHARS}ch" if sh else None for w, sh in zip(want, short, strict=True)]
    capped = [min(w, hi) + PAD_CHARS for w in want]
    total = sum(capped)
    return [f"{100 * w / total:.2f}%" for w in capped]
