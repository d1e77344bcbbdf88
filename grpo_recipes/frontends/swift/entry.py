"""ms-swift's own entry script started by another launcher, as launches in the wild write it:
``deepspeed --num_gpus 8 .../swift/cli/rlhf.py --rlhf_type grpo ...``, ``deepspeed --include localhost:0,1 ...``,
``torchrun --nproc_per_node 4 swift/cli/rlhf.py ...``, ``python swift/cli/rlhf.py ...``, ``python -m swift.cli.rlhf``,
``python -m torch.distributed.run ... swift/cli/rlhf.py`` (what ``swift rlhf`` itself runs with NPROC_PER_NODE set),
``srun ... python|torchrun ...``. Which entry a command runs is ``entrypoints.py``'s table; the launchers are read
with their own parsers by ``launchers.py``. ``python -m swift.cli.main rlhf`` is ``swift rlhf`` itself (its
NPROC_PER_NODE/NNODES apply).

``swift/cli/rlhf.py`` (ms-swift 4.6) only calls ``rlhf_main()``: the ``NPROC_PER_NODE``/``NNODES`` variables that
``swift rlhf`` turns into a torchrun command (``swift/cli/main.py``) do nothing here; the process count is the
launcher's. So the arguments after the script are read as ``swift rlhf``'s, and the launch environment
(``NPROC_PER_NODE``, ``NNODES``, ``CUDA_VISIBLE_DEVICES`` of the processes) is set from the launcher:

- ``python``: one process.
- ``torchrun``/``python -m torch.distributed.run``: ``--nproc-per-node`` (default 1; ``gpu``/``auto``: one per visible
  GPU) per node, ``--nnodes`` (``MIN:MAX``: MAX) nodes; ``--node-rank``, ``--master-addr`` (or the
  ``--rdzv-endpoint`` host), ``--master-port`` as written (torch/distributed/run.py).
- ``accelerate launch``: its ``--num_processes`` over ``--num_machines`` (frontends/trl/accelerate.py).
- ``srun`` running ``python`` directly: one process per task (srun(1): nodes x tasks per node).
- ``deepspeed`` (DeepSpeed 0.19.8 ``deepspeed/launcher/runner.py::main``, one node, no hostfile found): a non-empty
  ``CUDA_VISIBLE_DEVICES`` becomes ``--include localhost:<ids>`` unless ``--include``/``--exclude``/``--num_gpus``/
  ``--num_nodes > 1`` is given, and is then removed; ``--num_nodes``/``--num_gpus`` with ``--include``/``--exclude``
  stop with "Cannot specify num_nodes/gpus with include/exclude"; the pool is every GPU of the node
  (``device_count``), filtered by ``--include``/``--exclude`` (``parse_inclusion_exclusion``) and trimmed to
  ``range(num_gpus)`` (``apply_num_nodes_and_gpus``); ``--num_nodes > 1`` without a hostfile stops with "Num nodes is
  >1 but no extra nodes available via hostfile". One process per remaining slot, with those slots as its
  ``CUDA_VISIBLE_DEVICES`` (``deepspeed/launcher/launch.py``). A hostfile that exists (``--hostfile``, default
  ``/job/hostfile``) makes it a multi-node launch: one node per host, the first host's slots per node.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from ...errors import GuardError
from ...launch import Launch, visible_count
from ..launchers import deepspeed_layout


def _entry(argv: list[str], env: Mapping[str, str], source: str):
    """(the peeled launch, ms-swift's rlhf entry as the table has it, its arguments) when ``argv`` runs ms-swift's
    rlhf through a launcher or an interpreter, else None."""
    from ..entrypoints import lookup_command, lookup_module, lookup_script
    from ..launchers import peel

    if not argv or lookup_command(argv):
        return None
    p = peel(argv, env, source)
    if not p.layers:
        return None
    t = p.target
    found, args = None, []
    if p.form == 'module' and len(t) > 1:
        hit = lookup_module(t[1], t[2:])
        found, args = (hit[0], t[2 + hit[1] :]) if hit else (None, [])
    elif p.form == 'script' and t:
        hit = lookup_script(t[0], t[1:])
        found, args = (hit[0], t[1 + hit[1] :]) if hit else (None, [])
    elif p.form == 'command':
        found, args = lookup_command(t), t[2:]
    if found is None or (found.framework, found.role) != ('swift', 'train'):
        return None
    return p, found, args


def entry_index(argv: list[str]) -> int | None:
    """Index of the first ms-swift argument when ``argv`` runs ms-swift's rlhf entry under a launcher, else None."""
    try:
        hit = _entry(argv, {}, 'command line')
    except GuardError:
        return None
    return None if hit is None else len(argv) - len(hit[2])


def load_swift_entry(argv: list[str], env: Mapping[str, str], source: str) -> Launch | None:
    """A launcher running ms-swift's rlhf entry -> the ms-swift Launch with the launcher's process layout; None
    when ``argv`` is not such a launch."""
    hit = _entry(argv, env, source)
    if hit is None:
        return None
    p, found, args = hit
    env = {**env, **p.env}
    from ..launchers import _srun_note, launcher_layout, slurm_tasks
    from .reader import load_swift

    procs = [x for x in p.layers if x.kind != 'srun']
    srun = next((x for x in p.layers if x.kind == 'srun'), None)
    # `torchrun --nproc_per_node 2 $(which swift) rlhf` / `-m swift.cli.main rlhf`: each rank's swift/cli/main.py
    # runs `python rlhf.py` itself when NPROC_PER_NODE is unset (get_torchrun_args is None), and that child joins the
    # launcher's process group (RANK, WORLD_SIZE inherited): the launcher's layout, as for the entry file
    spawned = any(x.kind in ('torchrun', 'deepspeed', 'accelerate') for x in procs) and 'NPROC_PER_NODE' not in env
    if found.how == 'cli' and not spawned:  # `python -m swift.cli.main rlhf`, `srun swift rlhf`: swift rlhf itself
        launch = load_swift(args, env)
        launch.command = list(argv)
        return launch
    inner = procs[-1] if procs else None
    head = inner.kind if inner else 'srun'
    unused = {k: env[k] for k in ('NPROC_PER_NODE', 'NNODES') if k in env}  # swift/cli/main.py's, unread here
    env = {k: v for k, v in env.items() if k not in unused}
    launch = load_swift(args, env)
    layout: dict[str, Any]
    extra: dict[str, str] = {}
    if head == 'python' or head == 'srun':
        nodes, per = slurm_tasks(srun.opts, source) if srun else (1, 1)
        layout = {'nproc': per, 'nnodes': nodes, 'cvd': None}
        head = 'srun' if nodes * per > 1 else 'python'
    elif head == 'torchrun':
        lay = launcher_layout(inner, env, source)
        layout, extra = {'nproc': lay['nproc'], 'nnodes': lay['nnodes'], 'cvd': None}, lay['env']
    elif head == 'accelerate':
        from ..trl.accelerate import accelerate_settings

        acc = accelerate_settings(inner.opts, env)
        machines = max(1, acc.get('num_machines') or 1)
        n = acc.get('num_processes')
        layout = {
            'nproc': None if n is None and acc.get('config_source') is None else max(1, (n or 1) // machines),
            'nnodes': machines,
            'cvd': None if acc.get('gpu_ids') in (None, 'all', '') else str(acc['gpu_ids']),
        }
    else:
        exclude_later = bool(inner.opts.get('exclude'))  # needs the node's GPU count: default_swift_processes
        layout = (
            {'nproc': None, 'nnodes': 1, 'cvd': None}
            if exclude_later
            else deepspeed_layout(inner.opts, env.get('CUDA_VISIBLE_DEVICES'), None, source)
        )
    for key in ('NPROC_PER_NODE', 'NNODES', 'NODE_RANK', 'MASTER_ADDR', 'MASTER_PORT'):
        launch.env.pop(key, None)
    launch.env.update(extra)
    if layout['cvd'] is not None:
        launch.env['CUDA_VISIBLE_DEVICES'] = layout['cvd']
    elif head == 'deepspeed':
        launch.env.pop('CUDA_VISIBLE_DEVICES', None)  # deepspeed removed it: the node's GPUs
    if layout['nproc'] is not None and head != 'python':
        launch.env['NPROC_PER_NODE'] = str(layout['nproc'])
    if layout['nnodes'] > 1:
        launch.env['NNODES'] = str(layout['nnodes'])
    script = p.target[1] if p.form == 'module' else p.target[0]
    shown = inner.display if inner else 'srun'
    display = f'{shown} {"-m " if p.form == "module" else ""}{script}'
    opts = inner.opts if inner else dict(srun.opts)
    launch.trl = replace(
        launch.trl,
        entry={
            'launcher': inner.kind if inner else 'srun',
            'script': script,
            'display': display,
            'opts': opts,
            'source': source,
            'cvd': env.get('CUDA_VISIBLE_DEVICES'),
        },
    )
    if layout['nproc'] is None:
        launch.trl = replace(
            launch.trl,
            nproc_from_devices=True,
            launcher_cvd=None if head == 'deepspeed' else env.get('CUDA_VISIBLE_DEVICES'),
            display=display,
        )
    launch.command = list(argv)
    if unused:
        launch.trl = replace(launch.trl, entry={**launch.trl.entry, 'unused_env': unused})
    per = launch.env.get('NPROC_PER_NODE', 'one per visible GPU')
    how = {
        'python': 'one process',
        'torchrun': f'{per} process(es) per node ({shown})',
        'deepspeed': f'{launch.env.get("NPROC_PER_NODE", "one per GPU")} process(es) (deepspeed/launcher/runner.py)',
        'accelerate': f'{per} process(es) per node (accelerate launch)',
        'srun': f'{per} task(s) per node (srun)',
    }[head]
    if layout['nnodes'] > 1:
        how += f' on {layout["nnodes"]} nodes'
    launch.notes.append(
        f"`{display}` runs ms-swift's rlhf entry directly: its arguments are read as `swift rlhf`'s "
        f"and the processes are the launcher's: {how}"
    )
    note = _srun_note(srun.opts if srun else None, layout['nnodes'], source) if procs else None
    if note:
        launch.notes.append(note)
    return launch


def default_swift_processes(launch: Launch, gpus: int | None) -> str | None:
    """A launcher that starts one process per GPU with the count unknown when read (``deepspeed`` with no
    ``--num_gpus``/``--include`` and no ``CUDA_VISIBLE_DEVICES``, ``torchrun --nproc_per_node gpu``): the node's
    GPUs (``--gpus`` or nvidia-smi). Sets NPROC_PER_NODE; returns the assumption (None when not that case)."""
    entry = launch.trl.get('entry')
    if not entry or not launch.trl.get('nproc_from_devices') or 'NPROC_PER_NODE' in launch.env:
        return None
    cvd = launch.trl.get('launcher_cvd')
    n, _ = visible_count(cvd or None, gpus)  # an empty CUDA_VISIBLE_DEVICES here: the node's GPUs
    if entry['launcher'] == 'deepspeed' and gpus:
        layout = deepspeed_layout(entry['opts'], entry['cvd'], gpus, entry['source'])
        n = layout['nproc']
        if layout['cvd'] is not None:
            launch.env['CUDA_VISIBLE_DEVICES'] = layout['cvd']
    if not n:
        return (
            f'`{entry["display"]}` starts one process per GPU and the GPU count is not known (pass --gpus); '
            f'planned as 1 process'
        )
    launch.env['NPROC_PER_NODE'] = str(n)
    return f'`{entry["display"]}` starts one process per GPU of the node: {n} process(es)'
