"""GPU names -> catalogue cards (``gpus.CATALOGUE``), exactly: the names users type (``A100-80G``, ``4090``) and the
names ``nvidia-smi --query-gpu=name`` prints (``NVIDIA A100-SXM4-40GB``, ``NVIDIA A100 80GB PCIe``, ``NVIDIA
H100 80GB HBM3``, ``NVIDIA GeForce RTX 4090``).

A name is read as words: the vendor and brand words (NVIDIA, GeForce, Tesla), the card's model (``A100``,
``H20``, ``RTX 4090``), an optional memory size (``40GB``, ``80G``) and form-factor words (SXM4, PCIe, HBM3) that
do not change the memory. The model must be one word of the catalogue, compared whole (``H200`` is not ``H20``,
``A10G`` is not ``A10``); any other word (``NVL``, ``Ti``, ``D``) makes it a card the catalogue does not have.
A model with several sizes and no size given (``A100``: 40 or 80 GB) is ambiguous.
"""

from __future__ import annotations

import re

from .errors import GuardError
from .gpus import CATALOGUE, NOMINAL_GB

_BRAND = {'NVIDIA', 'GEFORCE', 'TESLA'}
# Form factors and memory kinds nvidia-smi prints beside the model; none changes the capacity of a catalogue card.
_FORM = {'SXM', 'SXM2', 'SXM4', 'SXM5', 'PCIE', 'HBM2', 'HBM2E', 'HBM3', 'HBM3E', 'GB', 'G'}
_SIZE = re.compile(r'^(\d{2,3})(?:G|GB|GIB)$')


def _family(card: str) -> str:
    """Catalogue name -> its model word: A100-40G -> A100, RTX4090 -> RTX4090, H20 -> H20."""
    return card.split('-')[0]


def _words(name: str) -> list[str]:
    words = [w for w in re.split(r'[\s_\-/]+', name.upper()) if w and w not in _BRAND]
    out: list[str] = []
    for w in words:  # "RTX 4090" and a bare "4090" are the model RTX4090; "80 GB" is one size word
        if out and out[-1] == 'RTX' and w.isdigit():
            out[-1] = 'RTX' + w
        elif out and out[-1] == 'RTX' and re.fullmatch(r'A\d{4}', w):  # "NVIDIA RTX A6000": the workstation card A6000
            out[-1] = w
        elif out and w in ('GB', 'G', 'GIB') and out[-1].isdigit():
            out[-1] += 'G'
        elif re.fullmatch(r'30[89]0|40[89]0', w):
            out.append('RTX' + w)
        elif out and re.fullmatch(r'\d{2,3}', w):  # A100-40, A100 80: the size without its unit
            out.append(w + 'G')
        else:
            out.append(w)
    return out


def matches(name: str) -> list[str]:
    """Every catalogue card the name can be (one: resolved; several: ambiguous; none: not in the catalogue)."""
    words = _words(name)
    families = {_family(k) for k in CATALOGUE}
    model = [w for w in words if w in families]
    sizes = [int(m.group(1)) for w in words if (m := _SIZE.match(w))]
    other = [w for w in words if w not in families and w not in _FORM and not _SIZE.match(w)]
    if len(model) != 1 or len(sizes) > 1 or other:
        return []
    cards = [k for k in CATALOGUE if _family(k) == model[0]]
    if sizes:
        cards = [k for k in cards if NOMINAL_GB[k] == sizes[0]]
    return cards


def lookup_exact(name: str | None) -> tuple[str, float] | None:
    """(card, capacity GiB) when the name is exactly one catalogue card, else None."""
    cards = matches(name) if name else []
    return (cards[0], CATALOGUE[cards[0]][0]) if len(cards) == 1 else None


def resolve(name: str) -> tuple[str, float]:
    """``--gpu-type`` -> (card, capacity GiB); GuardError (exit 2, one line) when ambiguous or unknown."""
    cards = matches(name)
    if len(cards) == 1:
        return cards[0], CATALOGUE[cards[0]][0]
    if cards:
        listed = ', '.join(f'{k} ({CATALOGUE[k][0]:.2f} GiB)' for k in cards)
        raise GuardError(f'--gpu-type {name}: ambiguous, it could be {listed}; pass one of them, or --gpu-mem GIB')
    raise GuardError(
        f'--gpu-type {name}: not a card of the catalogue ({", ".join(CATALOGUE)}); pass one of them, '
        f"or the card's capacity as torch reports it with --gpu-mem GIB"
    )


def check_hardware_flags(gpu_type: str | None, gpu_mem: float | None) -> None:
    """The CLI's --gpu-type / --gpu-mem, before anything is planned: exit 2 on a bad value."""
    if gpu_mem is not None and not 0 < gpu_mem < 1e6:  # NaN and inf fail both comparisons or the bound
        raise GuardError(
            f'--gpu-mem {gpu_mem}: must be a finite capacity in GiB, greater than 0 and below 1e6 '
            '(e.g. 79.15 for an A100 80GB)'
        )
    if gpu_type and gpu_mem is None:
        resolve(gpu_type)  # with --gpu-mem the name is only a label


def lookup(name: str | None) -> tuple[str, float] | None:
    """(canonical name, capacity GiB) for a user-given or driver-reported GPU name, matched exactly; None when it
    is no catalogue card or could be several."""
    return lookup_exact(name)
