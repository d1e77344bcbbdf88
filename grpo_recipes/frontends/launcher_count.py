"""The process count of a launch that starts one process per visible GPU, decided once the node's GPU count is
known (``--gpus``, else nvidia-smi), for ``check`` and ``validate`` alike: accelerate with no ``--num_processes`` and
no config file (``frontends/trl/accelerate_cmd.py``), deepspeed or ``torchrun --nproc_per_node gpu`` running
ms-swift's entry (``frontends/swift/entry.py``)."""

from __future__ import annotations

from ..hardware import detect
from ..launch import Launch
from .swift.entry import default_swift_processes
from .trl.accelerate_cmd import default_processes


def default_process_count(launch: Launch, gpus: int | None) -> str | None:
    """Sets the launch's NPROC_PER_NODE where the launcher counts GPUs, from ``gpus`` (the node's, None: unknown);
    returns the assumption, or None when the launch gives its own count."""
    if launch.kind == 'rollout' or not launch.trl.get('nproc_from_devices'):
        return None
    if launch.framework == 'trl':
        return default_processes(launch.env, launch.trl, gpus)
    return default_swift_processes(launch, gpus)


def apply_default_processes(launch: Launch, gpus: int | None) -> str | None:
    """:func:`default_process_count` for ``validate``, with the node's GPUs from nvidia-smi when ``--gpus`` is not
    given; the assumption is also added to the launch's notes."""
    if gpus is None and launch.trl.get('nproc_from_devices'):
        gpus = detect(None, None, None).gpus
    note = default_process_count(launch, gpus)
    if note and note not in launch.notes:
        launch.notes.append(note)
    return note
