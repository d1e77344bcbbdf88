"""Each GPU's memory by phase as a stacked bar against the card's capacity: in the terminal (rich, ``print_bars``,
under ``check``'s memory table) and as a figure (matplotlib, ``write_plot``, ``check --plot FILE.svg|png``).

The bars draw the estimate's own terms (``GPUMemory.phase_parts``), summed into the categories below; a bar's
total is the phase's figure in the memory table. Each category has its own character as well as its colour, so
the bars still read without colour (piped output)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from .gpu_ids import id_ranges

# (category, character, rich colour, matplotlib colour), in drawing order
CATEGORIES = (
    ('weights', '█', 'blue', '#4c72b0'),
    ('optimizer', '▓', 'magenta', '#8172b3'),
    ('activations', '▒', 'yellow', '#ccb974'),
    ('logits', '░', 'red', '#c44e52'),
    ('vLLM', '▞', 'green', '#55a868'),
    ('reserve', '·', 'bright_black', '#8c8c8c'),
    ('context', '▪', 'cyan', '#64b5cd'),
)
_TERMS = {
    'weights': (
        'weights',
        'ref_model',
        'lora_params',
        'zero3_live_params',
        'zero3_sync_gather',
        'zero3_generation_gather',
    ),
    'optimizer': ('grads+optimizer', 'adamw_foreach_temp'),
    'activations': ('activations', 'overlap', 'hf_generate_kv', 'tied_embedding_grad_temp'),
    'logits': ('logits',),
    'reserve': ('allocator_reserve', 'train_cache'),
    'context': ('cuda_context', 'nccl'),
}
_CATEGORY_OF = {term: cat for cat, terms in _TERMS.items() for term in terms}
PHASE_ORDER = ('startup', 'generate', 'rollout', 'sync', 'weight_sync', 'train')


def categories(terms: dict) -> dict[str, float]:
    """A phase's terms (GiB) summed into the categories, in drawing order. ``overlap`` (negative: what the logits'
    backward frees of the activations) is taken off the activations, then off the logits; a term this module does not
    know is counted as activations (the step's transients)."""
    out = dict.fromkeys((c[0] for c in CATEGORIES), 0.0)
    for k, v in terms.items():
        cat = 'vLLM' if k.startswith('vllm_') else _CATEGORY_OF.get(k, 'activations')
        out[cat] += v
    if out['activations'] < 0:
        out['logits'] = max(0.0, out['logits'] + out['activations'])
        out['activations'] = 0.0
    return out


def gpu_phases(m) -> list[tuple[str, dict[str, float]]]:
    """(phase, categories) for one GPU, in the order the phases happen. A GPU whose estimate has no per-phase terms
    (another front end's) draws its peak phase's terms only."""
    parts = getattr(m, 'phase_parts', None) or {m.phase: dict(m.phase_terms)}
    order = {p: i for i, p in enumerate(PHASE_ORDER)}
    return [(p, categories(parts[p])) for p in sorted(parts, key=lambda p: (order.get(p, len(order)), p))]


def groups(memory) -> list[tuple[list[str], object]]:
    """GPUs with the same bars, as the memory table groups them: ([ids], a representative GPUMemory)."""
    out: dict = {}
    for m in memory:
        key = (m.role, m.capacity_gib, repr(getattr(m, 'phase_parts', None) or sorted(m.phase_terms.items())))
        out.setdefault(key, ([], m))[0].append(m.gpu)
    return list(out.values())


def _bar(cats: dict[str, float], scale: float, width: int, capacity: float) -> Text:
    """``width`` cells for ``scale`` GiB; the capacity's cell is a bar ``│`` (red when the phase overflows)."""
    text = Text()
    cells = []
    cum = 0.0
    for name, char, colour, _ in CATEGORIES:
        start = round(cum / scale * width)
        cum += cats[name]
        cells += [(char, colour)] * max(0, round(cum / scale * width) - start)
    cap_at = min(width - 1, max(0, round(capacity / scale * width) - 1)) if capacity else None
    for i in range(width):
        if i == cap_at:
            text.append('│', style='bold red' if cum > capacity else 'bold')
        elif i < len(cells):
            text.append(cells[i][0], style=cells[i][1])
        else:
            text.append(' ')
    return text


def print_bars(report, out: Console) -> None:
    """The memory table's GPUs, one bar per phase: categories stacked, the card's capacity marked with ``│``."""
    memory = [m for m in report.memory if m.capacity_gib]
    if not memory:
        return
    rows = []
    for ids, m in groups(memory):
        label = f'GPU {id_ranges(ids)}'
        for i, (phase, cats) in enumerate(gpu_phases(m)):
            total = sum(cats.values())
            rows.append((label if i == 0 else '', phase, cats, total, m.capacity_gib))
    scale = max(max(r[3] for r in rows), max(r[4] for r in rows))
    lw = max(len(r[0]) for r in rows)
    pw = max(len(r[1]) for r in rows)
    width = max(10, out.width - lw - pw - 15)
    out.print()
    out.print(Text("Memory by phase (GiB; │ = the card's capacity)", style='bold'))
    for label, phase, cats, total, cap in rows:
        line = Text(f'{label:<{lw}} {phase:<{pw}} ')
        line.append_text(_bar(cats, scale, width, cap))
        line.append(f' {total:6.1f} {total / cap:4.0%}', style='bold red' if total > cap else '')
        out.print(line, no_wrap=True, overflow='crop')
    legend = Text(' ' * (lw + pw + 2))
    for name, char, colour, _ in CATEGORIES:
        legend.append(char, style=colour)
        legend.append(f' {name}  ')
    out.print(legend, overflow='fold')


def write_plot(report, path: str) -> None:
    """The same bars as a figure: one panel per group of identical GPUs, a horizontal bar per phase, the capacity as
    a vertical line. The format follows the file's extension (svg, png, pdf: whatever matplotlib writes)."""
    from ..errors import GuardError

    memory = [m for m in report.memory if m.capacity_gib]
    if not memory:
        raise GuardError(f'--plot {path}: no memory plan to draw ({report.unchecked or "no GPU memory was predicted"})')
    try:
        import matplotlib

        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise GuardError(f'--plot needs matplotlib ({e}); pip install matplotlib') from None

    panels = groups(memory)
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(9, 1.2 + 0.5 * sum(len(gpu_phases(m)) for _, m in panels)), squeeze=False
    )
    for ax, (ids, m) in zip(axes[:, 0], panels):
        phases = gpu_phases(m)
        names = [p for p, _ in phases][::-1]
        left = [0.0] * len(names)
        for cat, _, _, colour in CATEGORIES:
            vals = [c[cat] for _, c in phases][::-1]
            ax.barh(names, vals, left=left, color=colour, label=cat, edgecolor='white', linewidth=0.5)
            left = [a + b for a, b in zip(left, vals)]
        ax.axvline(m.capacity_gib, color='black', linestyle='--', linewidth=1)
        ax.set_title(f'GPU {id_ranges(ids)} ({m.role}): capacity {m.capacity_gib:.1f} GiB', loc='left', fontsize=10)
        for y, total in enumerate(left):
            ax.text(total, y, f' {total:.1f} GiB ({total / m.capacity_gib:.0%})', va='center', fontsize=8)
        ax.set_xlim(0, max(max(left), m.capacity_gib) * 1.25)
    axes[-1, 0].set_xlabel('GiB')
    axes[0, 0].legend(ncol=len(CATEGORIES), fontsize=7, loc='lower left', bbox_to_anchor=(0, 1.15), frameon=False)
    fig.tight_layout()
    try:
        fig.savefig(path)
    except (OSError, ValueError) as e:  # a directory that does not exist, an extension matplotlib cannot write
        raise GuardError(f'--plot {path}: {getattr(e, "strerror", None) or e}') from None
    finally:
        plt.close(fig)
