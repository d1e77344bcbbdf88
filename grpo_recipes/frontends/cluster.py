"""Values a launch script leaves to the cluster: variables a scheduler or launcher sets (``$RANK``, ``$MASTER_PORT``,
``$nnodes``, ``SLURM_*``, ``PET_*``, ...), ``$(nvidia-smi ...)`` substitutions, and ``<DATA_PATH>`` placeholders of an
example. The script reader (:mod:`.bash`) keeps each as written and names it in ``Command.unresolved`` /
``Command.placeholders``; this module decides what the guard does with them:

- a value that decides the process layout (``NPROC_PER_NODE``, ``NNODES``, ``CUDA_VISIBLE_DEVICES``, or a launcher's
  ``--nproc_per_node``/``--nnodes``/``--num_processes``/``--num_machines``/``--num_gpus``/``--num_nodes``) that is
  not resolved: exit 2 naming the variable and the flag, and how to give its value (``--env NAME=VALUE``);
- a placeholder in the training command (its value reaches the framework): exit 2, it is to be filled in;
- anything else not resolved (``MASTER_PORT``, ``NODE_RANK``, ``MASTER_ADDR`` on a node of a cluster): a note.
"""

from __future__ import annotations

import re

from ..errors import GuardError
from .bash import Command

CLUSTER = re.compile(
    r'^\$\{?(RANK|LOCAL_RANK|GROUP_RANK|ROLE_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|'
    r'NODE_RANK|NNODES|nnodes|NODES|NUM_NODES|NPROC_PER_NODE|nproc_per_node|GPUS_PER_NODE|'
    r'NODE_COUNT|HOSTNAME|SLURM_\w+|PET_\w+|OMPI_\w+|PMI_\w+|PMIX_\w+|MLP_\w+|KUBERNETES_\w+|'
    r'ARNOLD_\w+|METIS_\w+|LSB_\w+|PBS_\w+|SGE_\w+|JOB_\w+|TORCHELASTIC_\w+)\b'
)
"""Names a scheduler (Slurm, PBS, LSF, SGE, Kubernetes/PyTorchJob's PET_*, MPI's OMPI_*/PMI_*) or a launcher
(torchrun's RANK/WORLD_SIZE/MASTER_*) sets on the nodes it starts."""
DECIDING_ENV = ('NPROC_PER_NODE', 'NNODES', 'CUDA_VISIBLE_DEVICES')
DECIDING_FLAGS = (
    '--nproc_per_node',
    '--nproc-per-node',
    '--nnodes',
    '--num_processes',
    '--num-processes',
    '--num_machines',
    '--num-machines',
    '--num_gpus',
    '--num-gpus',
    '--num_nodes',
    '--num-nodes',
)
_REF = re.compile(r'\$\{?([A-Za-z_][A-Za-z0-9_]*)')


def _how(refs: list[str]) -> str:
    names = [m.group(1) for r in refs if (m := _REF.match(r)) and not r.startswith('$(')]
    subs = [r for r in refs if r.startswith('$(')]
    if names and not subs:
        where = (
            'a scheduler or launcher sets it on the cluster'
            if any(CLUSTER.match(r) for r in refs)
            else 'set neither earlier in the script nor in this environment'
        )
        give = ' '.join(f'--env {n}=VALUE' for n in dict.fromkeys(names))
        its = 'its value' if len(names) == 1 else 'their values'
        return (
            f'{", ".join(refs)} {"is" if len(refs) == 1 else "are"} not resolved here ({where}); give {its}: '
            f'grpo-guard check {give} ...'
        )
    # `$(( 4 * $COUNT_NODE - 4 ))`: the variables an arithmetic expansion reads, named for --env
    inner = [m.group(1) for r in refs if r.startswith('$((') for m in _REF.finditer(r[3:])]
    if inner and not [r for r in refs if r.startswith('$(') and not r.startswith('$((')]:
        give = ' '.join(f'--env {n}=VALUE' for n in dict.fromkeys(inner))
        names = ', '.join(dict.fromkeys(inner))
        return (
            f'{", ".join(refs)} {"is" if len(refs) == 1 else "are"} not resolved here ({names} set neither earlier '
            f'in the script nor in this environment); give the values it uses: grpo-guard check {give} ...'
        )
    return (
        f'{", ".join(refs)} is not resolved here (only running it gives the value); write the number, or give '
        f'the values it uses with --env NAME=VALUE'
    )


def check_layout(cmd: Command, where: str) -> None:
    """Exit 2 where a value that decides the process count could not be resolved (all such values in one line)."""
    from .shell_expand import unresolved

    found: list[tuple[str, list[str]]] = []  # (what, refs)
    for key in DECIDING_ENV:
        value = cmd.env.get(key)
        if value and unresolved(value):
            found.append((f'{key}={value}', unresolved(value)))
    for i, word in enumerate(cmd.argv):
        flag, eq, value = word.partition('=')
        if flag not in DECIDING_FLAGS:
            continue
        if not eq:
            value = cmd.argv[i + 1] if i + 1 < len(cmd.argv) else ''
        if unresolved(value):
            found.append((f'{flag} {value}', unresolved(value)))
    if found:
        refs = list(dict.fromkeys(r for _, rs in found for r in rs))
        verb = 'decides' if len(found) == 1 else 'decide'
        raise GuardError(f'{where}: {", ".join(w for w, _ in found)} {verb} the process count, but {_how(refs)}')


PLACEHOLDER = re.compile(r'^<[A-Za-z_][A-Za-z0-9_\-]*>$')


def check_placeholders(argv: list[str], where: str) -> None:
    """Exit 2 for an example's ``<DATA_PATH>`` left in a launch the framework's parser accepted (where the parser
    rejects it, its own message is shown, with a hint: check.py)."""
    for i, word in enumerate(argv):
        if PLACEHOLDER.match(word):
            flag = argv[i - 1] if i and argv[i - 1].startswith('-') else None
            raise GuardError(
                f'{where}: {f"{flag} {word}" if flag else word} is a placeholder of an example script, '
                f'left to fill in: put the real value there'
            )


def notes(cmd: Command, where: str, launches: int = 1) -> list[str]:
    """What the reader could not resolve or had to assume for the training command, for the report."""
    out = []
    if cmd.unresolved:
        cluster = [r for r in cmd.unresolved if CLUSTER.match(r)]
        others = [r for r in cmd.unresolved if r not in cluster]
        if cluster:
            out.append(
                f'{where}: not resolved here: {", ".join(cluster)} (set on the cluster by a scheduler or '
                f'launcher; give a value with --env NAME=VALUE where it matters)'
            )
        if others:
            out.append(f'{where}: not resolved here: {", ".join(others)}')
    if cmd.loops:
        out.append(
            f'{where}: the script runs {launches} launch(es) in a loop; checked: the first ({"; ".join(cmd.loops)})'
        )
    for a in cmd.assumed:
        out.append(f'{where}: {a}')
    return out
