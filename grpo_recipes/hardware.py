"""What GPUs the launch will run on: from ``--gpus/--gpu-type`` flags, else NVML / nvidia-smi, else unknown.

Only :func:`detect` touches the machine; everything else takes a :class:`Hardware` value.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import asdict, dataclass

from .errors import GuardError
from .gpu_names import lookup

MAX_GPUS_PER_NODE = 1024
"""GPUs per node above this are a typo (the largest nodes hold 16), and planning for them would take unbounded
time: ``--gpus`` and a calibration case's ``num_gpus`` are refused past it."""


@dataclass(frozen=True)
class Hardware:
    gpus: int | None = None
    """Physical GPUs per node (None: unknown, so device-count rules are skipped)."""
    gpu_type: str | None = None
    """Card name as given (``A100-80G``) or as the driver reports it."""
    source: str = 'unknown'
    """``flags``, ``nvidia-smi`` or ``unknown``."""
    rollout_gpus: tuple[int, ...] | None = None
    """Server mode: GPU ids of the ``swift rollout`` process (``--rollout-gpus``, launchers' ROLLOUT_GPUS)."""
    gpu_mem_gib: float | None = None
    """Capacity override (``--gpu-mem``), GiB as torch reports it."""
    rollout_remote: str | None = None
    """Server mode: why the rollout server is taken to run on another machine (None: this node), so its GPU ids
    are that machine's and are not checked against the training GPUs."""

    def capacity(self) -> tuple[str | None, float | None]:
        """(card name, GiB): the override, else the catalogue entry for gpu_type."""
        found = lookup(self.gpu_type)
        if self.gpu_mem_gib:
            return (found[0] if found else self.gpu_type), self.gpu_mem_gib
        return (found[0], found[1]) if found else (self.gpu_type, None)

    def to_dict(self) -> dict:
        return asdict(self)


def parse_gpu_ids(text: str, what: str) -> tuple[int, ...]:
    text = text.strip()
    if text == '':
        return ()
    try:
        ids = tuple(int(x) for x in text.split(','))
    except ValueError:
        raise GuardError(f'{what}={text!r}: expected comma-separated GPU ids such as 0,1,2') from None
    if any(i < 0 for i in ids):
        raise GuardError(f'{what}={text!r}: GPU ids must be >= 0')
    return ids


def _nvidia_smi() -> tuple[int, str] | None:
    exe = shutil.which('nvidia-smi')
    if not exe:
        return None
    try:
        out = subprocess.run(
            [exe, '--query-gpu=name', '--format=csv,noheader'], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
    if out.returncode != 0 or not names:
        return None
    return len(names), names[0]


def detect(gpus: int | None, gpu_type: str | None, rollout_gpus: str | None, gpu_mem: float | None = None) -> Hardware:
    rollout = parse_gpu_ids(rollout_gpus, '--rollout-gpus') if rollout_gpus is not None else None
    if gpus is not None:
        return Hardware(gpus=gpus, gpu_type=gpu_type, source='flags', rollout_gpus=rollout, gpu_mem_gib=gpu_mem)
    found = _nvidia_smi()
    if found is not None:
        return Hardware(
            gpus=found[0], gpu_type=gpu_type or found[1], source='nvidia-smi', rollout_gpus=rollout, gpu_mem_gib=gpu_mem
        )
    return Hardware(
        gpus=None,
        gpu_type=gpu_type,
        source='unknown' if not gpu_type else 'flags',
        rollout_gpus=rollout,
        gpu_mem_gib=gpu_mem,
    )
