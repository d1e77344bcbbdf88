"""The launchers that start a training script, read through with their own parsers: where a launcher's options end
and what it runs begins, and how many processes on how many nodes it starts.

- ``torchrun`` / ``python -m torch.distributed.run``: torch's ``torch.distributed.run.get_args_parser()``;
  ``python -m torch.distributed.launch``: ``torch.distributed.launch.parse_args`` (the same parser plus
  ``--use-env``). The process count is ``--nproc-per-node`` (an integer, or ``gpu``/``auto``: one per visible GPU,
  ``determine_local_world_size``) times ``--nnodes`` (``MIN:MAX``: ``parse_min_max_nnodes``; planned at MAX, the most
  it waits for). torch's parser takes each option's default from a ``PET_<NAME>`` variable (its ``env`` action), so
  it is built with the launch's ``PET_*`` variables in place of this process's.
- ``deepspeed``: DeepSpeed's ``deepspeed.launcher.runner.parse_args`` (its layout: ``swift/entry.py``).
- ``accelerate launch``: its options (``trl/accelerate.py``, accelerate's ``launch_command_parser``).
- ``srun`` (and ``#SBATCH`` lines): Slurm has no Python parser; the option table below is written from srun(1) and
  sbatch(1) (slurm.schedmd.com/srun.html, /sbatch.html): getopt_long options, so a short option's value may be
  attached (``-N2``) and a long one's follow ``=`` or the next word; srun's options end at the first word that is not
  an option, which is the command it runs on every task.
- a Python interpreter (``python``, ``python3``, ``python3.11``, ``/usr/bin/python3``) and its own options, from
  docs.python.org/3/using/cmdline.html (CPython parses them in C: Python/getopt.c, no Python-level parser).

The torch, DeepSpeed and accelerate parsers are rebuilt from their snapshot (``launcher_args.py``): reading a launch
imports none of these packages; tests hold the rebuilt parsers to the real ones.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import GuardError

PYTHON = re.compile(r'python(?:\d+(?:\.\d+)*)?')
# python's options with a value (cmdline.html): -c and -m end the interpreter's options; -W and -X take one.
_PY_VALUE = set('cmWX')
_PY_FLAGS = set('bBdEhiIOPqsSuvVx?R')
_PY_LONG_VALUE = {'--check-hash-based-pycs'}
_PY_LONG_FLAGS = {'--help', '--version', '--help-env', '--help-xoptions', '--help-all'}

TORCH_MODULES = ('torch.distributed.run', 'torch.distributed.launch')


@dataclass
class Layer:
    """One launcher a command goes through."""

    kind: str
    """``python``, ``torchrun``, ``deepspeed``, ``accelerate``, ``srun``."""
    display: str
    """As typed: ``torchrun``, ``python3 -m torch.distributed.run``, ``srun``, ``accelerate launch``."""
    opts: dict[str, Any] = field(default_factory=dict)
    """Its options as its parser returns them (defaults included; srun: the ones given)."""
    given: set[str] = field(default_factory=set)
    """The option names the command wrote."""


@dataclass
class Peeled:
    layers: list[Layer]
    target: list[str]
    """What the innermost launcher runs: ``['-m', MODULE, ...]``, ``[SCRIPT, ...]`` or a command's argv."""
    form: str
    """``module``, ``script`` or ``command``."""
    env: dict[str, str] = field(default_factory=dict)
    """Assignments of a command srun runs through a shell (``srun bash -c "VAR=1 accelerate launch ..."``)."""


def is_python(word: str) -> bool:
    return bool(PYTHON.fullmatch(os.path.basename(word)))


def python_options(args: list[str]) -> tuple[list[str], list[str]]:
    """The words after ``python`` -> (its own options, ``['-m', MODULE, ...]`` / ``[SCRIPT, ...]`` / ``['-c',
    ...]`` / [])."""
    i = 0
    while i < len(args):
        w = args[i]
        if w == '-' or not w.startswith('-'):
            return args[:i], args[i:]
        if w == '--':
            return args[: i + 1], args[i + 1 :]
        if w.startswith('--'):
            name = w.split('=', 1)[0]
            i += 2 if name in _PY_LONG_VALUE and '=' not in w else 1
            continue
        j = 1
        while j < len(w):
            c = w[j]
            if c in ('m', 'c'):
                value = w[j + 1 :]
                if value:  # -mswift.cli.rlhf
                    return args[:i], [f'-{c}', value, *args[i + 1 :]]
                return args[:i], [f'-{c}', *args[i + 1 :]]
            if c in _PY_VALUE:
                i += 1 if w[j + 1 :] else 2
                break
            j += 1
        else:
            i += 1
    return args, []


class _ParseError(Exception):
    pass


# Launcher options whose integer value decides nothing planned (which node this is, the rendezvous port, restarts):
# a value left unresolved there (`--machine_rank $SLURM_PROCID` in a sub-script run without its parent) is read as 0
# so the launcher's parser takes the words; the reader's note names what was not resolved. The process counts
# (--num_processes, --nproc_per_node, --nnodes, ...) are never stood in for (cluster.check_layout asks for them).
NEUTRAL_LAUNCHER_INTS = frozenset(
    {'machine_rank', 'main_process_port', 'node_rank', 'master_port', 'max_restarts', 'monitor_interval'}
)


def _neutral(args: list[str]) -> list[str]:
    """``args`` with each unresolved value of a NEUTRAL_LAUNCHER_INTS option read as 0 (as many words as before)."""
    out = list(args)
    for i, w in enumerate(out):
        name, eq, value = w.partition('=')
        key = name.lstrip('-').replace('-', '_')
        if not w.startswith('--') or key not in NEUTRAL_LAUNCHER_INTS:
            continue
        if eq and '$' in value:
            out[i] = f'{name}=0'
        elif not eq and i + 1 < len(out) and '$' in out[i + 1]:
            out[i + 1] = '0'
    return out


def _raise(message: str):
    raise _ParseError(message)


def _unresolved_word(words: list[str]) -> str | None:
    return next((w for w in words if '$' in w), None)


def _parse_failed(what: str, message: str, words: list[str], source: str) -> GuardError:
    var = _unresolved_word(words)
    if var is not None and 'invalid' in message:
        ref = re.search(r'\$\{?([A-Za-z_][A-Za-z0-9_]*)', var)
        return GuardError(
            f'{source}: {what} {var}: the variable could not be resolved (set neither earlier in the '
            f'script nor in this environment); pass --env {ref.group(1) if ref else "NAME"}=... or '
            f'export it before running the guard ({what} stops with "{message}")'
        )
    return GuardError(f'{source}: {what} stops at once with "error: {message}"')


def _integer(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _rebuilt(name: str, what: str, source: str, env: Mapping[str, str] | None = None):
    """The launcher's parser rebuilt from its snapshot, its errors raised as _ParseError."""
    from .launcher_args import build_parser, flag_variables

    try:
        parser = build_parser(name, env)
    except ValueError as e:  # torch's check_env reads int(PET_<NAME>) while its parser is built
        bad = [f'{k}={env[k]}' for k in flag_variables(name) if k in (env or {}) and not _integer(env[k])]
        raise GuardError(
            f'{source}: {what} stops before parsing: {", ".join(bad)}: {e}; torch reads this variable as an '
            f'integer (0 or 1)'
        ) from None
    parser.error = _raise  # type: ignore[method-assign]
    return parser


def parse_torchrun(
    args: list[str], env: Mapping[str, str], source: str, module: str = 'torch.distributed.run', what: str = 'torchrun'
) -> tuple[dict[str, Any], set[str], list[str], str]:
    """torchrun's words (after ``torchrun``) -> (its options, the ones written, what it runs, its form)."""
    parser = _rebuilt(
        'torch.distributed.launch' if module == 'torch.distributed.launch' else 'torchrun', what, source, env
    )
    try:
        ns = parser.parse_args(_neutral(args))
    except _ParseError as e:
        raise _parse_failed(what, str(e), args, source) from None
    opts = vars(ns)
    n = len(args) - len(ns.training_script_args) - 1
    given = {
        a.dest
        for a in parser._actions
        if a.option_strings and any(w == o or w.startswith(o + '=') for w in args[:n] for o in a.option_strings)
    }
    given |= {
        a.dest
        for a in parser._actions
        for o in a.option_strings
        if f'PET_{o.lstrip("-").replace("-", "_").upper()}' in env
    }
    target = list(args[n:])  # as written: the stand-ins (_neutral) are for the launcher's own options only
    form = 'command' if ns.no_python else 'module' if ns.module else 'script'
    return opts, given, target, form


def parse_deepspeed(args: list[str], source: str) -> tuple[dict[str, Any], set[str], list[str], str]:
    """deepspeed's words (after ``deepspeed``) -> (its options, the ones written, what it runs, its form), from
    DeepSpeed's own ``runner.parse_args``."""
    parser = _rebuilt('deepspeed', 'deepspeed', source)
    try:
        ns = parser.parse_args(_neutral(args))
    except _ParseError as e:
        raise _parse_failed('deepspeed', str(e), args, source) from None
    opts = vars(ns)
    n = len(args) - len(ns.user_args) - 1
    given = {
        k
        for k in opts
        if any(w.lstrip('-').split('=', 1)[0].replace('-', '_') == k for w in args[:n] if w.startswith('-'))
    }
    for short, name in (('-H', 'hostfile'), ('-i', 'include'), ('-e', 'exclude'), ('--num_accelerators', 'num_gpus')):
        if any(w == short or w.startswith(short + '=') for w in args[:n]):
            given.add(name)
    form = 'command' if ns.no_python else 'module' if ns.module else 'script'
    return opts, given, list(args[n:]), form  # as written (the stand-ins are for deepspeed's own options)


# ---- Slurm ----------------------------------------------------------------------------------------------------
# srun(1)/sbatch(1) options that take a value (getopt_long required_argument). Every other option is a flag or takes
# its value only after `=` (optional_argument: --exclusive[=user|mcs], --bcast[=dest], --kill-on-bad-exit[=0|1],
# --immediate[=secs], --no-kill[=off], --x11[=...], --propagate[=...], --resv-ports[=n], --nice[=adj], --pty[=fd],
# --compress[=type], --send-libs[=yes|no], -K[0|1], -I[secs], -k[off]).
SLURM_SHORT_VALUE = set('AbBcCdDeFGiJLmMnNopqStTwWx')
SLURM_LONG_VALUE = {
    'account',
    'acctg-freq',
    'accel-bind',
    'array',
    'batch',
    'bb',
    'bbf',
    'begin',
    'bcast-exclude',
    'chdir',
    'cluster-constraint',
    'clusters',
    'comment',
    'constraint',
    'container',
    'container-id',
    'core-spec',
    'cores-per-socket',
    'cpu-bind',
    'cpu-freq',
    'cpus-per-gpu',
    'cpus-per-task',
    'deadline',
    'delay-boot',
    'dependency',
    'distribution',
    'epilog',
    'error',
    'exclude',
    'export',
    'export-file',
    'extra',
    'extra-node-info',
    'get-user-env',
    'gid',
    'gpu-bind',
    'gpu-freq',
    'gpus',
    'gpus-per-node',
    'gpus-per-socket',
    'gpus-per-task',
    'gres',
    'gres-flags',
    'het-group',
    'hint',
    'input',
    'job-name',
    'jobid',
    'licenses',
    'mail-type',
    'mail-user',
    'mcs-label',
    'mem',
    'mem-bind',
    'mem-per-cpu',
    'mem-per-gpu',
    'mincpus',
    'mpi',
    'network',
    'nodefile',
    'nodelist',
    'nodes',
    'ntasks',
    'ntasks-per-core',
    'ntasks-per-gpu',
    'ntasks-per-node',
    'ntasks-per-socket',
    'ntasks-per-tres',
    'open-mode',
    'output',
    'partition',
    'power',
    'prefer',
    'priority',
    'profile',
    'prolog',
    'qos',
    'reservation',
    'segment',
    'signal',
    'slurmd-debug',
    'sockets-per-node',
    'switches',
    'task-epilog',
    'task-prolog',
    'thread-spec',
    'threads',
    'threads-per-core',
    'time',
    'time-min',
    'tmp',
    'tres-bind',
    'tres-per-task',
    'uid',
    'wait',
    'wckey',
    'wrap',
}
SLURM_SHORT = {
    'N': 'nodes',
    'n': 'ntasks',
    'G': 'gpus',
    'c': 'cpus-per-task',
    'w': 'nodelist',
    'x': 'exclude',
    'p': 'partition',
    'J': 'job-name',
    't': 'time',
    'o': 'output',
    'e': 'error',
    'D': 'chdir',
}


def slurm_options(args: list[str]) -> tuple[dict[str, str], list[str]]:
    """srun's (or an #SBATCH line's) words -> (long option name -> value, the command it runs)."""
    opts: dict[str, str] = {}
    i = 0
    while i < len(args):
        w = args[i]
        if w == '--':
            return opts, args[i + 1 :]
        if not w.startswith('-') or w == '-':
            return opts, args[i:]
        if w.startswith('--'):
            name, eq, val = w[2:].partition('=')
            if name in SLURM_LONG_VALUE and not eq:
                val, i = (args[i + 1] if i + 1 < len(args) else ''), i + 1
            opts[name] = val if (eq or name in SLURM_LONG_VALUE) else 'true'
            i += 1
            continue
        j = 1
        while j < len(w):
            c = w[j]
            if c in SLURM_SHORT_VALUE:
                val = w[j + 1 :]
                if not val:
                    val, i = (args[i + 1] if i + 1 < len(args) else ''), i + 1
                opts[SLURM_SHORT.get(c, c)] = val
                break
            opts[SLURM_SHORT.get(c, c)] = 'true'
            j += 1
        i += 1
    return opts, []


def job_step(argv: list[str]) -> tuple[dict[str, str], list[str]] | None:
    """``srun [OPTIONS] CMD ...``: (the variables Slurm gives the job step for those options, CMD ...), so that a
    script srun runs (``srun --nodes=1 bash train.sh ARGS``) is read as bash runs it there; ``sbatch [OPTIONS]
    --wrap="CMD"``: the job sbatch submits, which runs CMD in ``sh`` (sbatch(1) --wrap), with the batch job's
    variables; None for any other command (shell.read_script's ``launcher``)."""
    if not argv:
        return None
    head = argv[0].rsplit('/', 1)[-1]
    if head == 'sbatch':
        opts, _ = slurm_options(argv[1:])
        return (batch_env(opts), ['sh', '-c', opts['wrap']]) if opts.get('wrap') else None
    if head != 'srun':
        return None
    opts, cmd = slurm_options(argv[1:])
    # srun(1) OUTPUT ENVIRONMENT VARIABLES: SLURM_STEP_ID marks a job step (its GPUs are the step's own)
    return ({**slurm_env(opts), 'SLURM_STEP_ID': '0'}, cmd) if cmd else None


def sbatch_directives(text: str) -> dict[str, str]:
    """The ``#SBATCH`` lines of a batch script: sbatch(1) reads them up to the first line that is neither a comment
    nor blank."""
    opts: dict[str, str] = {}
    for line in text.splitlines()[1:] if text.startswith('#!') else text.splitlines():
        s = line.strip()
        if not s:
            continue
        if not s.startswith('#'):
            break
        if s.startswith('#SBATCH') and s[7:8] in (' ', '\t'):
            import shlex

            try:
                words = shlex.split(s[7:], comments=True)
            except ValueError:
                continue
            opts.update(slurm_options(words)[0])
    return opts


def _gres_gpus(spec: str | None) -> int | None:
    """``--gres gpu:8`` / ``gpu:a100:8`` / ``gpu`` (count 1) / ``gpu:a100:8(S:0-1),shard:2`` -> 8 (sbatch(1) --gres:
    ``name[[:type]:count]``, a comma-separated list)."""
    for part in (spec or '').split(','):
        bits = part.split(':')
        if bits[0] != 'gpu':
            continue
        count = bits[-1].split('(')[0] if len(bits) > 1 else '1'
        return int(count) if count.isdigit() else 1
    return None


def _per_node_gpus(spec: str | None) -> int | None:
    """``--gpus-per-node [type:]count`` -> count."""
    count = (spec or '').split(':')[-1]
    return int(count) if count.isdigit() else None


def slurm_env(opts: Mapping[str, str]) -> dict[str, str]:
    """The variables a Slurm job step's command sees for these options (sbatch(1)/srun(1) OUTPUT ENVIRONMENT
    VARIABLES), on its first node and first task: SLURM_NNODES/SLURM_JOB_NUM_NODES, SLURM_NTASKS,
    SLURM_NTASKS_PER_NODE, SLURM_GPUS_ON_NODE, SLURM_GPUS_PER_NODE, SLURM_NODEID/SLURM_PROCID/SLURM_LOCALID 0, and
    CUDA_VISIBLE_DEVICES for the GPUs a node gets."""
    out = {'SLURM_NODEID': '0', 'SLURM_PROCID': '0', 'SLURM_LOCALID': '0'}
    nodes = opts.get('nodes')
    if nodes:
        n = nodes.replace(',', '-').split('-')[-1]  # MIN-MAX: the most Slurm gives
        out.update(SLURM_NNODES=n, SLURM_JOB_NUM_NODES=n)
    if opts.get('ntasks'):
        out['SLURM_NTASKS'] = opts['ntasks']
    if opts.get('ntasks-per-node'):
        out['SLURM_NTASKS_PER_NODE'] = opts['ntasks-per-node']
    if opts.get('gpus-per-node'):
        out['SLURM_GPUS_PER_NODE'] = opts['gpus-per-node']
    g = _per_node_gpus(opts.get('gpus-per-node')) or _gres_gpus(opts.get('gres'))
    if not g and opts.get('gpus') and (nodes or '1') == '1':  # --gpus=[type:]N for the job, on its one node
        g = _per_node_gpus(opts['gpus'])
    if g:
        out['SLURM_GPUS_ON_NODE'] = str(g)
        # Slurm's GPU gres sets CUDA_VISIBLE_DEVICES for the job's GPUs (slurm.schedmd.com/gres.html, "GPU
        # Management"), numbered from 0 where cgroups constrain the devices, as most clusters do
        out['CUDA_VISIBLE_DEVICES'] = ','.join(str(i) for i in range(int(g)))
    return out


def batch_env(directives: Mapping[str, str]) -> dict[str, str]:
    """The variables sbatch gives a batch script for its ``#SBATCH`` directives (``slurm_env``), with the job's node
    count when no ``--nodes`` is given: sbatch(1) -N, "the default behavior is to allocate enough nodes to satisfy the
    requested resources": one node for the tasks of one, ntasks / ntasks-per-node rounded up when both are given;
    left unknown when only --ntasks is (the packing depends on the nodes' CPUs)."""
    out = slurm_env(directives)
    if 'SLURM_NNODES' not in out:
        tasks, per = directives.get('ntasks'), directives.get('ntasks-per-node')
        n = None
        if not tasks:
            n = 1
        elif tasks.isdigit() and per and per.isdigit() and int(per) > 0:
            n = -(-int(tasks) // int(per))
        if n is not None:
            out.update(SLURM_NNODES=str(n), SLURM_JOB_NUM_NODES=str(n))
    return out


def _int(value: Any, what: str, source: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        if '$' in str(value):
            var = re.search(r'\$\{?([A-Za-z_][A-Za-z0-9_]*)', str(value))
            name = var.group(1) if var else 'NAME'
            raise GuardError(
                f'{source}: {what} {value}: the variable could not be resolved (set neither earlier in '
                f'the script nor in this environment), and it decides the world size; pass --env '
                f'{name}=... or export it before running the guard, or write the value'
            ) from None
        raise GuardError(f'{source}: {what} {value!r}: must be an integer') from None


def slurm_tasks(opts: Mapping[str, str], source: str) -> tuple[int, int]:
    """(nodes, tasks per node) of a job step (srun(1): -N/--nodes MIN[-MAX] (planned at MAX); --ntasks-per-node; else
    -n/--ntasks spread over the nodes, the first node taking the most (block distribution); else one task per
    node)."""
    raw_nodes = str(opts.get('nodes') or '1').replace(',', '-').split('-')[-1]
    nodes = _int(raw_nodes, 'srun --nodes', source)
    if opts.get('ntasks-per-node'):
        return nodes, _int(opts['ntasks-per-node'], 'srun --ntasks-per-node', source)
    if opts.get('ntasks'):
        n = _int(opts['ntasks'], 'srun --ntasks', source)
        if not opts.get('nodes'):
            return 1, n  # -n alone: the tasks fit where Slurm puts them; planned on one node
        return nodes, -(-n // max(1, nodes))
    return nodes, 1


def through_srun(
    argv: list[str], env: Mapping[str, str], source: str
) -> tuple[dict[str, str], list[str], dict[str, str]]:
    """``srun [options] CMD`` -> (srun's options, CMD, assignments CMD makes): srun(1) runs CMD on every task; a
    wrapper (``nohup``, ``timeout``) and a shell's command string (``bash -c "VAR=1 accelerate launch ..."``, the
    shape of open-r1's slurm/train.slurm) are read through as the script reader reads them."""
    from . import kind_of
    from .bash.wrappers import shell_c, strip_wrapper
    from .shell import read_script

    opts, inner = slurm_options(argv[1:])
    more: dict[str, str] = {}
    for _ in range(4):
        if not inner:
            break
        text = shell_c(inner)
        if text is not None:
            cmds = read_script(text, dict(env), source=f'{source} (srun ... -c)')
            cmd = next((c for c in cmds if not c.commented and kind_of(c.argv)), None)
            if cmd is None:
                break
            more.update(cmd.env)
            inner = cmd.argv
            continue
        stripped = strip_wrapper(inner)
        if stripped is None:
            break
        inner = stripped
    if not inner:
        raise GuardError(
            f'{source}: `srun` with no command to run (srun(1): the first word that is not an option is the program)'
        )
    return opts, inner, more


# ---- peeling ----------------------------------------------------------------------------------------------------


def peel(argv: list[str], env: Mapping[str, str], source: str = 'command line') -> Peeled:
    """Read through the launchers of ``argv`` with their own parsers -> the layers and what the innermost runs."""
    layers: list[Layer] = []
    rest = list(argv)
    inner_env: dict[str, str] = {}
    while rest:
        head = os.path.basename(rest[0])
        if head == 'srun':
            opts, rest, more = through_srun(rest, env, source)
            layers.append(Layer('srun', 'srun', opts, set(opts)))
            env = {**env, **more}
            inner_env.update(more)
            continue
        if head == 'torchrun':
            opts, given, rest, form = parse_torchrun(rest[1:], env, source)
            layers.append(Layer('torchrun', 'torchrun', opts, given))
            if form != 'command':
                return Peeled(layers, (['-m'] if form == 'module' else []) + rest, form, env=inner_env)
            continue
        if head == 'deepspeed':
            opts, given, rest, form = parse_deepspeed(rest[1:], source)
            layers.append(Layer('deepspeed', 'deepspeed', opts, given))
            if form != 'command':
                return Peeled(layers, (['-m'] if form == 'module' else []) + rest, form, env=inner_env)
            continue
        if head == 'accelerate' and rest[1:2] == ['launch']:
            opts, inner = accelerate_options(rest[2:], source)
            layers.append(Layer('accelerate', 'accelerate launch', opts, set(opts)))
            if not inner:
                return Peeled(layers, [], 'script', env=inner_env)
            if opts.get('no_python'):
                rest = inner
                continue
            return Peeled(
                layers,
                (['-m'] if opts.get('module') else []) + inner,
                'module' if opts.get('module') else 'script',
                env=inner_env,
            )
        if is_python(rest[0]):
            own, after = python_options(rest[1:])
            display = os.path.basename(rest[0])
            if after[:1] == ['-m'] and after[1:2] and after[1] in TORCH_MODULES:
                what = f'{display} -m {after[1]}'
                opts, given, inner, form = parse_torchrun(after[2:], env, source, after[1], what)
                layers.append(Layer('torchrun', what, opts, given))
                if form != 'command':
                    return Peeled(layers, (['-m'] if form == 'module' else []) + inner, form, env=inner_env)
                rest = inner
                continue
            layers.append(Layer('python', display, {'options': own}, set()))
            return Peeled(layers, after, 'module' if after[:1] == ['-m'] else 'script', env=inner_env)
        break
    return Peeled(layers, rest, 'command', env=inner_env)


# ---- what a command is, and its processes ----------------------------------------------------------------------


LAUNCHER_HEADS = ('srun', 'torchrun', 'deepspeed')
# Packages whose `python -m` starts a server or a tool, never a GRPO trainer: vLLM's and SGLang's OpenAI servers
# (a reward or judge model beside the launch), LMDeploy, uvicorn/gunicorn, the standard library's and hubs' tools.
NOT_TRAINERS = (
    'vllm', 'sglang', 'lmdeploy', 'uvicorn', 'gunicorn', 'http', 'pip', 'venv', 'ensurepip', 'json', 'tensorboard',
    'wandb', 'huggingface_hub', 'modelscope', 'ray', 'fastchat', 'llama_cpp',
)  # fmt: skip


def classify(argv: list[str], env: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """(framework, role) of a command: the entry it runs looked up in ``entrypoints``, through its launchers.
    framework ``unread``: a training command no reader here reads (a script that does not use TRL, ms-swift's
    other entry points); ``launcher``: a launcher whose own parser refuses the command (reading it says why)."""
    from .entrypoints import imports_trl, lookup_command, lookup_module, lookup_script, module_file, serves_http

    if not argv:
        return None
    hit = lookup_command(argv)
    if hit:
        return hit.framework, hit.role
    head = os.path.basename(argv[0])
    if re.fullmatch(r'\$\{?[A-Za-z_][A-Za-z0-9_]*\}?', argv[0]) and argv[1:]:
        as_python = classify(['python', *argv[1:]], env)  # `$PYTHON -m swift.cli.rlhf` with $PYTHON set nowhere
        return ('unresolved', as_python[1]) if as_python and as_python[0] != 'unread' else None
    if not (head in LAUNCHER_HEADS or is_python(argv[0]) or (head == 'accelerate' and argv[1:2] == ['launch'])):
        return None
    try:
        p = peel(argv, env or {})
    except GuardError:
        return 'launcher', 'train'
    t = p.target
    if p.form == 'command':
        hit = lookup_command(t)
        return (hit.framework, hit.role) if hit else (classify(t, env) if t and t != argv else None)
    if p.form == 'module':
        found = lookup_module(t[1], t[2:]) if len(t) > 1 else None
        if found:
            return found[0].framework, found[0].role
        if len(t) > 1 and t[1].split('.')[0] in ('swift', 'trl') and not t[1].startswith('trl.scripts'):
            return 'unread', 'train'
        if len(t) > 1 and t[1].split('.')[0] in NOT_TRAINERS:
            return None  # a server or tool beside the launch (a judge model's vLLM server), not a trainer
        if len(t) > 1 and imports_trl(module_file(t[1])) is False:
            return 'unread', 'train'  # the module's file is here (run from its repository) and does not use TRL
        return 'trl', 'train'
    if not t:  # `python` alone, `accelerate launch` with no script (its reader says so)
        return ('trl', 'train') if p.layers[-1].kind == 'accelerate' else None
    found = lookup_script(t[0], t[1:])
    if found:
        return found[0].framework, found[0].role
    if t[0] == '-c':  # python -c '...': not a launch
        return None
    if serves_http(t[0]):
        return None  # a project's own vLLM/HTTP server (a copy of trl's vllm_serve.py, a judge): not a trainer
    return ('unread', 'train') if imports_trl(t[0]) is False else ('trl', 'train')


def unresolved_head(argv: list[str], source: str) -> GuardError:
    """``$PYTHON -m swift.cli.rlhf ...`` with the variable set nowhere the reader could see."""
    name = argv[0].strip('${}')
    return GuardError(
        f'{source}: {argv[0]}: the variable could not be resolved (set neither earlier in the script '
        f'nor in this environment), and it names the program that runs `{" ".join(argv[1:3])}`; pass '
        f'--env {name}=... or export it before running the guard'
    )


def launcher_layout(layer: Layer, env: Mapping[str, str], source: str) -> dict[str, Any]:
    """A torchrun / srun layer's processes: {'nproc' (None: one per visible GPU), 'nnodes', 'env' (NODE_RANK,
    MASTER_ADDR, MASTER_PORT as written)}."""
    o = layer.opts
    if layer.kind == 'torchrun':
        what = layer.display
        per = str(o.get('nproc_per_node'))
        if per in ('gpu', 'auto'):  # determine_local_world_size: torch.cuda.device_count()
            nproc = None
        elif per in ('cpu', 'xpu'):
            raise GuardError(f'{source}: {what} --nproc-per-node {per}: not a CUDA launch; write the process count')
        else:
            nproc = _int(per, f'{what} --nproc-per-node', source)
        raw = str(o.get('nnodes'))
        if '$' in raw:
            _int(raw, f'{what} --nnodes', source)
        from .launcher_args import parse_min_max_nnodes

        try:
            _, nnodes = parse_min_max_nnodes(raw)  # MIN:MAX: planned at MAX, the most it waits for
        except (ValueError, RuntimeError) as e:
            raise GuardError(f'{source}: {what} --nnodes {raw}: {e}') from None
        out: dict[str, str] = {}
        if 'node_rank' in layer.given:
            out['NODE_RANK'] = str(_int(o['node_rank'], f'{what} --node-rank', source))
        if 'master_addr' in layer.given:
            out['MASTER_ADDR'] = str(o['master_addr'])
        elif 'rdzv_endpoint' in layer.given and o.get('rdzv_endpoint'):
            out['MASTER_ADDR'] = str(o['rdzv_endpoint']).rsplit(':', 1)[0]
        if 'master_port' in layer.given and o.get('master_port') is not None:
            out['MASTER_PORT'] = str(o['master_port'])
        return {'nproc': nproc, 'nnodes': nnodes, 'env': out}
    if layer.kind == 'srun':
        nodes, per = slurm_tasks(o, source)
        return {'nproc': per, 'nnodes': nodes, 'env': {}}
    raise ValueError(layer.kind)


def _srun_note(srun: Mapping[str, str] | None, nnodes: int, source: str) -> str | None:
    """srun over more tasks than the launcher inside it spans nodes: each copy beyond that trains on its own."""
    if srun is None:
        return None
    nodes, per = slurm_tasks(srun, source)
    if nodes * per > nnodes:
        return (
            f'`srun` starts {nodes * per} copies of the launcher ({nodes} node(s) x {per} task(s)) but the '
            f'launcher inside spans {nnodes} node(s): each copy beyond that forms a group of its own'
        )
    return None


def is_process_launcher(argv: list[str]) -> bool:
    """torchrun, ``python -m torch.distributed.run|launch`` or deepspeed."""
    if not argv:
        return False
    if os.path.basename(argv[0]) in ('torchrun', 'deepspeed'):
        return True
    return is_python(argv[0]) and python_options(argv[1:])[1][:2] in (['-m', m] for m in TORCH_MODULES)


def process_launch(argv: list[str], env: Mapping[str, str], source: str) -> dict[str, Any]:
    """torchrun / ``python -m torch.distributed.run`` / deepspeed running a script -> {'script', 'script_args',
    'opts' (the options written), 'nproc' (None: one per visible GPU), 'nnodes', 'env', 'cvd'}."""
    p = peel(argv, env, source)
    layer = p.layers[0]
    t = p.target
    script = f'-m {t[1]}' if p.form == 'module' and len(t) > 1 else (t[0] if t else None)
    args = t[2:] if p.form == 'module' else t[1:]
    if layer.kind == 'torchrun':
        lay = dict(launcher_layout(layer, env, source), cvd=None)
    else:
        d = (
            {'nproc': None, 'nnodes': 1, 'cvd': None}
            if layer.opts.get('exclude')
            else deepspeed_layout(layer.opts, env.get('CUDA_VISIBLE_DEVICES'), None, source)
        )
        lay = {'nproc': d['nproc'], 'nnodes': d['nnodes'], 'env': {}, 'cvd': d['cvd']}
    return {
        **lay,
        'script': script,
        'script_args': args,
        'opts': {k: layer.opts[k] for k in sorted(layer.given) if k in layer.opts},
    }


# DeepSpeed's runner (deepspeed/launcher/runner.py): which GPUs of this node its options select
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
            raise GuardError(
                f'{source}: deepspeed --include/--exclude {spec}: host {host!r} is not in a hostfile, '
                f'so deepspeed stops with "Hostname \'{host}\' not found in hostfile"; name localhost'
            )
        if not slots:
            return None
        out += [_int(s, '--include/--exclude slot', source) for s in slots.split(',')]
    bad = [s for s in out if pool is not None and s >= pool]
    if bad:
        raise GuardError(
            f'{source}: deepspeed --include/--exclude {spec}: the node has {pool} GPU(s), so deepspeed '
            f"stops with \"No slot '{bad[0]}' specified on host 'localhost'\""
        )
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
        raise GuardError(
            f'{source}: deepspeed stops with "Cannot specify num_nodes/gpus with include/exclude" '
            f'(deepspeed/launcher/runner.py); keep --num_gpus or --include, not both'
        )
    if num_nodes > 1:
        raise GuardError(
            f'{source}: deepspeed --num_nodes {num_nodes} with no hostfile: deepspeed stops with "Num '
            f'nodes is >1 but no extra nodes available via hostfile"; pass --hostfile or drop --num_nodes'
        )
    slots = list(range(gpus)) if gpus else None
    if include:
        chosen = _slots(include, gpus, source)
        slots = chosen if chosen is not None else slots
    elif exclude:
        dropped = _slots(exclude, gpus, source)
        if dropped is None:
            raise GuardError(f'{source}: deepspeed --exclude {exclude} leaves no GPU on this node')
        if slots is None:
            raise GuardError(
                f"{source}: deepspeed --exclude {exclude}: the node's GPU count is not known (pass --gpus)"
            )
        slots = [s for s in slots if s not in dropped]
    if num_gpus > 0:
        slots = list(range(num_gpus))
    if slots is None:
        return {'nproc': None, 'nnodes': 1, 'cvd': None}
    return {'nproc': len(slots), 'nnodes': 1, 'cvd': ','.join(map(str, slots))}


def accelerate_options(args: list[str], source: str = 'accelerate launch') -> tuple[dict[str, Any], list[str]]:
    """accelerate launch's own options -> (the options written, with the values its parser gives them; the script and
    its args), from accelerate's own ``launch_command_parser`` (accelerate/commands/launch.py): its flags, its options
    with a value, and where the training script begins (rebuilt from its snapshot: launcher_args.py). No script:
    (options, [])."""
    parser = _rebuilt('accelerate launch', 'accelerate launch', source)
    try:
        ns = parser.parse_args(_neutral(args))
    except _ParseError as e:
        if 'training_script' in str(e) and 'required' in str(e):  # accelerate_cmd.require_script says it
            try:  # the options' values all the same (`trl grpo` hands accelerate its options without a script)
                return _given(parser, args, parser.parse_args([*_neutral(args), '--', 'script']), len(args)), []
            except _ParseError:
                return {}, []
        raise _parse_failed('accelerate launch', str(e), args, source) from None
    n = len(args) - len(ns.training_script_args) - 1
    return _given(parser, args, ns, n), args[n:]


def _given(parser, args: list[str], ns, n: int) -> dict[str, Any]:
    """The options among ``args[:n]`` (accelerate's own words), with the parsed values (True for a flag)."""
    out: dict[str, Any] = {}
    for action in parser._actions:
        if not action.option_strings or not any(
            w == o or w.startswith(o + '=') for w in args[:n] for o in action.option_strings
        ):
            continue
        out[action.dest] = getattr(ns, action.dest)
    return out
