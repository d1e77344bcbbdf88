"""``grpo-recipes ls``'s table, laid out for the terminal's width: the recipe name and the predicted peak are
never cut or dropped. When the one-line layout does not fit, each name is written on two lines (``model/`` and the
variant under it), which is what makes a 46-character name fit 80 columns beside the other columns."""

from __future__ import annotations

from rich import box
from rich.table import Table

COLUMNS = ('recipe', 'peak', 'GPUs', 'mode', 'tuner', 'valid.')
"""The peak comes right after the name: it is what the table is for."""
_GAP = 2  # rich's padding (0, 1) between two columns


def _cells(r: dict, codes: str) -> list[str]:
    peak = f'{r["peak_fraction"]:.0%}' if r['peak_fraction'] is not None else '-'
    hw = f'{r["gpus"]}x{r["gpu_type"]}'
    if r.get('nodes', 1) > 1:  # a multi-node recipe: its node count, and the rollout node on a line of its own
        hw = f'{r["nodes"]} nodes ×\n{hw}'
    if r.get('rollout_node'):
        hw += '\n+ rollout'
    return [r['name'], peak, hw, r['mode'], r['tuner'], codes]


def _width(rows: list[list[str]]) -> int:
    widths = [max(len(h), *(len(line) for row in rows for line in row[i].splitlines())) for i, h in enumerate(COLUMNS)]
    return sum(widths) + _GAP * (len(widths) - 1)


def recipes_table(rows: list[dict], codes: list[str], width: int, title: str) -> Table:
    cells = [_cells(r, c) for r, c in zip(rows, codes)]
    if cells and _width(cells) > width:  # two-line names: "model/" then the variant, indented
        for row in cells:
            model, _, variant = row[0].partition('/')
            row[0] = f'{model}/\n  {variant}' if variant else model
    t = Table(
        title=title,
        title_justify='left',
        title_style='bold',
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
    )
    for col in COLUMNS:
        t.add_column(col, no_wrap=True, overflow='fold', justify='right' if col == 'peak' else 'left')
    for row in cells:
        t.add_row(*row)
    return t
