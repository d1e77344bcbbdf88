"""The process count of a launch that starts one process per visible GPU, decided once the node's GPU count is
known (``--gpus``, else nvidia-smi), for ``check`` and ``validate`` alike: accelerate with no ``--num_processes`` and
no config file (``frontends/trl/accelerate_cmd.py``), deepspeed or ``torchrun --nproc_per_node gpu`` running
ms-swift's entry (``frontends/swift/entry.py``)."""
from __future__ import annotations

from ..launch import Launch


def apply_default_processes(launch: Launch, gpus: int | None) -> str | None:
    """Sets the launch's NPROC_PER_NODE where the launcher counts GPUs; returns the assumption (also added to the
    launch's notes), or None when the launch gives its own count."""
    if launch.kind == 'rollout' or not launch.trl.get('nproc_from_devices'):
        return None
    if gpus is None:
        from ..hardware import detect
        gpus = detect(None, None, None).gpus
    if launch.framework == 'trl':
        from .trl.accelerate_cmd import default_processes
        note = default_processes(launch.env, launch.trl, gpus)
    else:
        from .swift.entry import default_swift_processes
        note = default_swift_processes(launch, gpus)
    if note and note not in launch.notes:
        launch.notes.append(note)
    return note
