"""Result tables as data: one small typed value that both a Markdown report and a notebook render.

A report module builds its tables as :class:`ResultTable` values (a title, column names, rows of cells)
and its prose around them; :meth:`ResultTable.markdown` gives the report's pipe table and
:meth:`ResultTable.frame` a pandas DataFrame for the notebooks — so a notebook never parses Markdown
and never builds a result table by hand."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence


@dataclass(frozen=True)
class ResultTable:
    """A titled table: ``columns`` names, ``rows`` of cells (already formatted strings, or numbers).

    The first column is the row label (``frame()`` makes it the index)."""

    name: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        bad = [r for r in self.rows if len(r) != len(self.columns)]
        if bad:
            raise ValueError(f"table {self.name!r}: a row has {len(bad[0])} cells for {len(self.columns)} columns")

    def markdown(self) -> str:
        """The pipe table (no title): a header row, a ``|---|`` row, one line per row."""
        lines = ["| " + " | ".join(self.columns) + " |", "|---|" + "---|" * (len(self.columns) - 1)]
        lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in self.rows]
        return "\n".join(lines)

    def frame(self):
        """A DataFrame indexed by the first column, titled by :attr:`title` (``df.attrs['title']``)."""
        import pandas as pd

        df = pd.DataFrame([list(r) for r in self.rows], columns=list(self.columns)).set_index(self.columns[0])
        df.attrs["title"] = self.title
        return df


def table(name: str, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> ResultTable:
    return ResultTable(name, title, tuple(columns), tuple(tuple(r) for r in rows))


def frames(tables: Sequence[ResultTable]) -> dict[str, Any]:
    """``{table.name: DataFrame}`` in order: what a notebook displays."""
    return {t.name: t.frame() for t in tables}
