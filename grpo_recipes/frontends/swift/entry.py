"""ms-swift's own entry script started by another launcher, as launches in the wild write it:
``deepspeed --num_gpus 8 .../swift/cli/rlhf.py --rlhf_type grpo ...``, ``deepspeed --include localhost:0,1 ...``,
``torchrun --nproc_per_node 4 swift/cli/rlhf.py ...``, ``python swift/cli/rlhf.py ...``, ``python -m swift.cli.rlhf``.

``swift/cli/rlhf.py`` (ms-swift 4.6) only calls ``rlhf_main()``: the ``NPROC_PER_NODE``/``NNODES`` variables that
``swift rlhf`` turns into a torchrun command (``swift/cli/main.py``) do nothing here; the process count is the
launcher's. So the arguments after the script are read as ``swift rlhf``'s, and the launch environment
(``NPROC_PER_NODE``, ``NNODES``, ``CUDA_VISIBLE_DEVICES`` of the processes) is set from the launcher:

- ``python``: one process.
- ``torchrun``: ``--nproc_per_node`` (default 1; ``gpu``/``auto``: one per visible GPU), ``--nnodes``
  (torch/distributed/run.py).
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

import os
import re
from dataclasses import replace
from typing import Any, Mapping

from ...errors import GuardError
from ...launch import Launch, visible_count

LAUNCHERS = ('python', 'torchrun', 'deepspeed')
MODULE = 'swift.cli.rlhf'
# deepspeed runner options that take a value (deepspeed/launcher/runner.py parse_args)
_DS_VALUES = {'hostfile', 'H', 'include', 'i', 'exclude', 'e', 'num_nodes', 'num_gpus', 'num_accelerators',
              'master_port', 'master_addr', 'node_rank', 'launcher', 'launcher_args', 'save_pid', 'autotuning',
              'bind_core_list', 'ssh_port', 'venv_script', 'log_level', 'enable_each_rank_log'}
_DS_SHORT = {'H': 'hostfile', 'i': 'include', 'e': 'exclude', 'num_accelerators': 'num_gpus'}
_TORCHRUN_FLAGS = {'standalone', 'no_python', 'no-python', 'run_path', 'run-path', 'module', 'm', 'tee'}


def _head(argv: list[str]) -> str:
    head = os.path.basename(argv[0]) if argv else ''
    return 'python' if re.fullmatch(r'python[\d.]*', head) else head


def _options(argv: list[str]) -> tuple[dict[str, Any], int]:
    """The launcher's own options -> (options, index of the script or module)."""
    head, opts, i = _head(argv), {}, 1
    while i < len(argv) and argv[i].startswith('-'):
        tok = argv[i]
        if tok in ('-m', '--module'):
            return {**opts, 'module': True}, i + 1
        name, eq, val = tok.lstrip('-').partition('=')
        key = name.replace('-', '_')
        if head == 'python':
            takes = name in ('W', 'X', 'c')  # python's options with a value
        elif head == 'deepspeed':
            takes = name in _DS_VALUES
            key = _DS_SHORT.get(key, key)
        else:
            takes = name not in _TORCHRUN_FLAGS
        if takes and not eq:
            val, i = (argv[i + 1] if i + 1 < len(argv) else ''), i + 2
        else:
            i += 1
        opts[key] = val if takes else True
    return opts, i


def entry_index(argv: list[str]) -> int | None:
    """Index of the first ms-swift argument when ``argv`` runs ms-swift's rlhf entry under python/torchrun/deepspeed,
    else None."""
    if _head(argv) not in LAUNCHERS:
        return None
    opts, i = _options(argv)
    if i >= len(argv):
        return None
    script = argv[i]
    if opts.get('module'):
        return i + 1 if script == MODULE else None
    return i + 1 if script.replace('\\', '/').endswith('swift/cli/rlhf.py') else None


def _int(value: Any, what: str, source: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        if '$' in str(value):  # a variable set neither in the script nor in this environment
            raise GuardError(f'{source}: {what} {value}: the variable could not be resolved (set neither earlier in '
                             f'the script nor in this environment); export it before running the guard, or write '
                             f'the value') from None
        raise GuardError(f'{source}: {what} {value!r}: must be an integer') from None


def _hostfile(path: str) -> dict[str, int] | None:
    """deepspeed's ``fetch_hostfile``: ``host slots=N`` lines; None when the file is not there."""
    if not os.path.isfile(path):
        return None
    pool: dict[str, int] = {}
    with open(path, encoding='utf-8') as f:
        for line in f:
            m = re.search(r'^(\S+)\s+slots=(\d+)', line.strip())
            if m:
                pool[m.group(1)] = int(m.group(2))
    return pool or None


def _slots(spec: str, pool: int | None, source: str) -> list[int] | None:
    """``localhost:0,1`` / ``localhost`` -> slots on this node (``parse_node_config_list``); None: all of them."""
    out: list[int] = []
    for node in spec.split('@'):
        host, _, slots = node.partition(':')
        if host != 'localhost':
            raise GuardError(f'{source}: deepspeed --include/--exclude {spec}: host {host!r} is not in a hostfile, '
                             f'so deepspeed stops with "Hostname \'{host}\' not found in hostfile"; name localhost')
        if not slots:
            return None
        out += [_int(s, '--include/--exclude slot', source) for s in slots.split(',')]
    bad = [s for s in out if pool is not None and s >= pool]
    if bad:
        raise GuardError(f'{source}: deepspeed --include/--exclude {spec}: the node has {pool} GPU(s), so deepspeed '
                         f'stops with "No slot \'{bad[0]}\' specified on host \'localhost\'"')
    return sorted(set(out))


def deepspeed_layout(opts: dict[str, Any], cvd: str | None, gpus: int | None, source: str) -> dict[str, Any]:
    """deepspeed runner's processes: {'nproc', 'nnodes', 'cvd'} (nproc None: one per GPU of the node, count unknown
    here; cvd None: the node's GPUs from 0)."""
    include, exclude = opts.get('include') or '', opts.get('exclude') or ''
    num_nodes = _int(opts.get('num_nodes', -1), 'deepspeed --num_nodes', source)
    num_gpus = _int(opts.get('num_gpus', -1), 'deepspeed --num_gpus', source)
    hosts = _hostfile(str(opts.get('hostfile') or '/job/hostfile'))
    if hosts:  # multi-node: the hostfile's hosts, trimmed to --num_nodes, the first host's slots per node
        names = list(hosts)[:num_nodes] if num_nodes > 0 else list(hosts)
        per = num_gpus if num_gpus > 0 else hosts[names[0]]
        return {'nproc': per, 'nnodes': len(names), 'cvd': None}
    if cvd and not (include or exclude or num_nodes > 1 or num_gpus > 0):
        include = f'localhost:{cvd}'
    if (num_nodes >= 0 or num_gpus >= 0) and (include or exclude):
        raise GuardError(f'{source}: deepspeed stops with "Cannot specify num_nodes/gpus with include/exclude" '
                         f'(deepspeed/launcher/runner.py); keep --num_gpus or --include, not both')
    if num_nodes > 1:
        raise GuardError(f'{source}: deepspeed --num_nodes {num_nodes} with no hostfile: deepspeed stops with "Num '
                         f'nodes is >1 but no extra nodes available via hostfile"; pass --hostfile or drop --num_nodes')
    slots = list(range(gpus)) if gpus else None
    if include:
        chosen = _slots(include, gpus, source)
        slots = chosen if chosen is not None else slots
    elif exclude:
        dropped = _slots(exclude, gpus, source)
        if dropped is None:
            raise GuardError(f'{source}: deepspeed --exclude {exclude} leaves no GPU on this node')
        if slots is None:
            raise GuardError(f'{source}: deepspeed --exclude {exclude}: the node\'s GPU count is not known (pass '
                             f'--gpus)')
        slots = [s for s in slots if s not in dropped]
    if num_gpus > 0:
        slots = list(range(num_gpus))
    if slots is None:
        return {'nproc': None, 'nnodes': 1, 'cvd': None}
    return {'nproc': len(slots), 'nnodes': 1, 'cvd': ','.join(map(str, slots))}


def load_swift_entry(argv: list[str], env: Mapping[str, str], source: str) -> Launch | None:
    """A launcher running ms-swift's rlhf entry -> the ms-swift Launch with the launcher's process layout; None
    when ``argv`` is not such a launch."""
    start = entry_index(argv)
    if start is None:
        return None
    from .reader import load_swift
    head = _head(argv)
    opts, _ = _options(argv)
    env = {k: v for k, v in env.items() if k not in ('NPROC_PER_NODE', 'NNODES')}  # swift/cli/main.py's, unused
    launch = load_swift(argv[start:], env)
    layout: dict[str, Any]
    if head == 'python':
        layout = {'nproc': 1, 'nnodes': 1, 'cvd': None}
    elif head == 'torchrun':
        per = str(opts.get('nproc_per_node') or '1')
        nnodes = str(opts.get('nnodes') or '1').split(':')[-1]  # MIN:MAX: the most it waits for
        layout = {'nproc': None if per in ('gpu', 'auto') else _int(per, 'torchrun --nproc_per_node', source),
                  'nnodes': _int(nnodes, 'torchrun --nnodes', source), 'cvd': None}
    else:
        exclude_later = bool(opts.get('exclude'))  # needs the node's GPU count: default_swift_processes
        layout = {'nproc': None, 'nnodes': 1, 'cvd': None} if exclude_later else \
            deepspeed_layout(opts, env.get('CUDA_VISIBLE_DEVICES'), None, source)
    for key in ('NPROC_PER_NODE', 'NNODES'):
        launch.env.pop(key, None)
    if layout['cvd'] is not None:
        launch.env['CUDA_VISIBLE_DEVICES'] = layout['cvd']
    elif head == 'deepspeed':
        launch.env.pop('CUDA_VISIBLE_DEVICES', None)  # deepspeed removed it: the node's GPUs
    if layout['nproc'] is not None and (head != 'python'):
        launch.env['NPROC_PER_NODE'] = str(layout['nproc'])
    if layout['nnodes'] > 1:
        launch.env['NNODES'] = str(layout['nnodes'])
    script = argv[start - 1]
    display = f'{argv[0]} {"-m " if opts.get("module") else ""}{script}'
    launch.trl = replace(launch.trl, entry={'launcher': head, 'script': script, 'display': display, 'opts': opts,
                                            'source': source, 'cvd': env.get('CUDA_VISIBLE_DEVICES')})
    if layout['nproc'] is None:
        launch.trl = replace(launch.trl, nproc_from_devices=True, launcher_cvd=None if head == 'deepspeed' else
                             env.get('CUDA_VISIBLE_DEVICES'), display=display)
    launch.command = list(argv)
    how = {'python': 'one process', 'torchrun': f'{launch.env.get("NPROC_PER_NODE", "one per visible GPU")} '
           f'process(es) per node (torchrun)', 'deepspeed': f'{launch.env.get("NPROC_PER_NODE", "one per GPU")} '
           f'process(es) (deepspeed/launcher/runner.py)'}[head]
    launch.notes.append(f'`{display}` runs ms-swift\'s rlhf entry directly: its arguments are read as `swift rlhf`\'s '
                        f'and the processes are the launcher\'s: {how}')
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
        return f'`{entry["display"]}` starts one process per GPU and the GPU count is not known (pass --gpus); ' \
               f'planned as 1 process'
    launch.env['NPROC_PER_NODE'] = str(n)
    return f'`{entry["display"]}` starts one process per GPU of the node: {n} process(es)'
