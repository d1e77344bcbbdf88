"""Launch readers, one per framework, all producing the one typed :class:`~grpo_recipes.launch.Launch`.

    shell.py   VAR=value / env / export prefixes and whole launcher scripts -> commands (never run)
    FRAMEWORKS each framework's facts and hooks (``<framework>/framework.py``: grpo_recipes.framework.Framework),
               which the shared pipeline reads as ``launch.fw`` instead of comparing framework names
    swift/     swift rlhf (config file and/or flags), swift rollout; ms-swift's real parser (worker)
    trl/       accelerate launch / python / torchrun / trl grpo, trl vllm-serve; TRL's names and wording;
               the GRPOConfig(...) a TRL training script writes in code (read with ast, never run)

:func:`read_launch` is the dispatcher: what the user typed after ``grpo-guard check`` (a config file, a
``.sh`` launcher, or a command line after ``--``) plus an optional ``--rollout`` command.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping

from ..errors import GuardError
from ..framework import register
from ..launch import CONFIG_SUFFIXES, LAUNCH_ENV_KEYS, Launch, Rollout
from .megatron.framework import MEGATRON
from .shell import Command, parse_command_text, read_script, split_env
from .swift.framework import SWIFT
from .swift.reader import load_swift, read_rollout
from .trl.framework import TRL
from .trl.reader import load_trl, read_vllm_serve

# One line per framework: its name (Launch.framework) -> what it does and its front end's hooks (framework.py).
FRAMEWORKS = {f.name: f for f in (SWIFT, TRL, MEGATRON)}
register(*FRAMEWORKS.values())  # launch.fw / rollout.fw find them by name


def kind_of(argv: list[str], env: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """(framework, 'train' | 'rollout') of a command's argv, or None if it is neither: the entry point it runs
    (``entrypoints.py``'s table), read through its launchers with their own parsers (``launchers.py``). framework
    ``megatron``: Megatron-SWIFT (frontends/megatron, planned by its own checker: OWN_CHECKS); ``unread``: a
    trainer no reader here reads (``unread_trainer``); ``launcher``: a launcher that
    refuses its own options (reading it says why)."""
    if not argv:
        return None
    from .launchers import classify

    kind = classify(argv, env)
    if kind is not None:
        return kind
    if argv[0].endswith(CONFIG_SUFFIXES) or argv[0].startswith('-'):
        return 'swift', 'train'  # what follows `swift rlhf`
    return None


UNREAD = ('unread',)
# A front end whose launch is planned and checked by its own plan, rules and memory model instead of check.py's
# ZeRO/vLLM pipeline: framework -> 'module:function' (launch, hw, packages=, model_config=, data_stats=) -> report.
OWN_CHECKS = {'megatron': 'grpo_recipes.frontends.megatron.checked:check_report'}


def own_check(launch):
    """The checker of a launch whose front end plans it itself (OWN_CHECKS), None for the shared pipeline."""
    target = OWN_CHECKS.get(getattr(launch, 'framework', None))
    if target is None:
        return None
    import importlib

    module, func = target.split(':')
    return getattr(importlib.import_module(module), func)


def unread_trainer(argv: list[str], framework: str, source: str) -> str:
    """Why a training command was not read (the verdict of a launch with it is UNCHECKED, never OK)."""
    shown = ' '.join(argv[:4]) + (' ...' if len(argv) > 4 else '')
    return (
        f"the trainer `{shown}` ({source}) runs neither ms-swift's nor TRL's GRPO entry (a script that does not "
        f'import trl, or another ms-swift command), so this guard does not read it: its processes, batch and '
        f'memory are not checked'
    )


def _refuse_unread(argv: list[str], framework: str, source: str) -> GuardError:
    return GuardError(
        f'{unread_trainer(argv, framework, source)}; nothing else to check (a rollout server beside it would be)'
    )


def read_rollout_command(cmd: Command, environ: Mapping[str, str], source: str) -> Rollout:
    kind = kind_of(cmd.argv, {**environ, **cmd.env})
    if kind is None or kind[1] != 'rollout':
        raise GuardError(
            f'{source}: {" ".join(cmd.argv[:3])} is not a rollout server command; expected '
            f'`swift rollout ...` or `trl vllm-serve ...`'
        )
    if kind[0] == 'unresolved':
        from .launchers import unresolved_head

        raise unresolved_head(cmd.argv, source)
    env = {**{k: v for k, v in environ.items() if k == 'CUDA_VISIBLE_DEVICES'}, **cmd.env}
    argv = _rollout_argv(cmd.argv, kind[0])
    rollout = read_rollout(argv, env, source) if kind[0] == 'swift' else read_vllm_serve(argv, env, source)
    rollout.commented = cmd.commented  # quoted in a comment of the script: documentation (Rollout.commented)
    first = os.path.basename(cmd.argv[0]) if cmd.argv else ''
    if first in JOB_LAUNCHERS:  # `srun --nodes=1 trl vllm-serve ...`: the scheduler places it
        rollout.launcher = first
    elif 'SLURM_STEP_ID' in cmd.env:  # read inside a job step (`srun ... bash -c "... trl vllm-serve ..."`)
        rollout.launcher = 'srun'
    return rollout


# Programs whose command runs in the foreground unless the script adds `&`: a server started through one of them
# before the training launch blocks the script (a wrapper that detaches, tmux or screen -d, is not one of them)
FOREGROUND_SERVERS = ('swift', 'trl', 'vllm', 'python', 'python3', 'nohup', 'env', 'uv', 'accelerate', 'torchrun')

JOB_LAUNCHERS = ('srun', 'salloc', 'ssh', 'pdsh', 'mpirun', 'mpiexec')
"""Programs that start a command on a node they choose: a server started through one is not placed here."""


def _rollout_argv(argv: list[str], framework: str) -> list[str]:
    """A rollout server's command as its reader takes it (``swift rollout ARGS`` / ``trl vllm-serve ARGS``), from
    ``python -m swift.cli.rollout ARGS``, ``.../swift/cli/rollout.py ARGS``, ``python -m trl.scripts.vllm_serve``."""
    from .entrypoints import lookup_command, lookup_module, lookup_script
    from .launchers import peel

    if lookup_command(argv):
        return argv
    p = peel(argv, {})
    t = p.target
    hit = (
        lookup_module(t[1], t[2:])
        if p.form == 'module' and len(t) > 1
        else lookup_script(t[0], t[1:])
        if p.form == 'script' and t
        else None
    )
    if hit is None:
        return t if p.form == 'command' else argv
    rest = t[2 + hit[1] :] if p.form == 'module' else t[1 + hit[1] :]
    return (['swift', 'rollout'] if framework == 'swift' else ['trl', 'vllm-serve']) + rest


def _train_launch(framework: str, argv: list[str], env: Mapping[str, str], source: str) -> Launch:
    """A training command (its whole argv, launchers included) -> the Launch of its framework's reader."""
    if framework == 'unresolved':
        from .launchers import unresolved_head

        raise unresolved_head(argv, source)
    if framework == 'launcher':  # its own parser refuses it: that error
        from .launchers import peel

        peel(argv, env, source)
    if framework in UNREAD or framework == 'launcher':
        raise _refuse_unread(argv, framework, source)
    if framework == 'megatron':
        return _megatron_launch(argv, env, source)
    if framework == 'swift':
        from .entrypoints import lookup_command
        from .swift.entry import load_swift_entry

        launch = load_swift_entry(argv, env, source)
        if launch is not None:
            return launch
        return load_swift(argv[2:] if lookup_command(argv) else argv, env)
    return load_trl(_trl_cli(argv), env, source)


def _megatron_launch(argv: list[str], env: Mapping[str, str], source: str):
    """``megatron rlhf ...`` (NPROC_PER_NODE/NNODES from the environment, as ms-swift's CLI reads them), or
    ms-swift's ``swift/cli/_megatron/rlhf.py`` under torchrun / ``python -m torch.distributed.run`` (the launcher's
    own layout) -> the Megatron front end's launch."""
    from .entrypoints import lookup_command
    from .launchers import is_process_launcher, peel, process_launch
    from .megatron import read

    release = env.get('GRPO_GUARD_SWIFT_VERSION')
    if lookup_command(argv):
        return read(argv, env, source, release)
    env = dict(env)
    if is_process_launcher(argv):
        lay = process_launch(argv, env, source)
        if lay.get('nproc'):
            env['NPROC_PER_NODE'] = str(lay['nproc'])
        if lay.get('nnodes'):
            env['NNODES'] = str(lay['nnodes'])
        return read(lay['script_args'], {**env, **lay.get('env', {})}, source, release)
    p = peel(argv, env, source)  # python -m swift.cli._megatron.rlhf ARGS / .../swift/cli/_megatron/rlhf.py ARGS
    rest = p.target[2:] if p.form == 'module' else p.target[1:]
    return read(rest, env, source, release)


def _trl_cli(argv: list[str]) -> list[str]:
    """``python -m trl.cli.main grpo ARGS`` (or its file) is ``trl grpo ARGS``: TRL's console script's main."""
    from .entrypoints import ROUTERS, lookup_script, module_file
    from .launchers import is_python, python_options

    if not argv or not is_python(argv[0]):
        return argv
    rest = python_options(argv[1:])[1]
    if rest[:1] == ['-m'] and len(rest) > 2 and ROUTERS.get(rest[1]) == 'trl':
        return ['trl', *rest[2:]]
    if rest and rest[0].endswith(module_file('trl.cli.main')) and lookup_script(rest[0], rest[1:]):
        return ['trl', *rest[1:]]
    return argv


# A comment above a rollout command that puts it on another machine: ms-swift's examples write
# "# run in another node" (external/grpo_32b_full.sh). A node number alone ("# node 0") does not say which node
# the trainer is on, so it is not read as one.
_OTHER_MACHINE = re.compile(
    r'\b(?:another|other|separate|different|remote|second)\s+(?:node|machine|host|server)s?\b', re.I
)


DEFAULTS_TAKEN = 'empty values taken for'


def _guessed(argv: list[str]) -> bool:
    """A command read as a trainer only by guess: ``python FILE.py``/``python -m M`` (no launcher) whose file is not
    here and is no entry point the guard knows (launchers.classify takes such a script for TRL's), and ``python -``
    (a program on stdin, a here-document)."""
    from .bash.wrappers import strip_wrapper
    from .entrypoints import lookup_module, lookup_script
    from .launchers import is_python

    argv = strip_wrapper(argv) or argv
    if not argv or not is_python(argv[0]):
        return False
    if argv[1:2] == ['-m'] and len(argv) > 2:
        return lookup_module(argv[2], argv[3:]) is None
    if '-' in argv[1:2] or len(argv) == 1:  # `python - <<'PY'`: a program on stdin (a preflight check, as a rule)
        return True
    target = next((a for a in argv[1:] if not a.startswith('-')), None)
    return bool(target) and lookup_script(target, []) is None and not os.path.isfile(target)


def _script_arguments(cmds) -> list[str]:
    """The script's own positional parameters its commands hold unresolved (``$1``, ``${2}``, ``$@``), in order."""
    found = {m.group(1) for c in cmds for name in c.unresolved if (m := re.fullmatch(r'\$\{?([1-9@*#])\}?', name))}
    return [f'${n}' for n in sorted(found)]


def _with_arguments(e: GuardError, cmds, args: list[str] | None, path: str) -> GuardError:
    """A refusal of a script read without its own arguments, with the way to give them where it takes some (the
    error as it is otherwise)."""
    taken = _script_arguments(cmds) if args is None else []
    if not taken or '-- bash ' in str(e):
        return e
    return GuardError(
        f'{e}; the script takes arguments ({", ".join(taken)}): check it as you run it: '
        f'grpo-guard check -- bash {path} ARGS'
    )


def _from_script(
    path: str, environ: Mapping[str, str], args: list[str] | None = None, machine=None
) -> tuple[Launch | None, Rollout | None]:
    """A launcher script read as bash runs it: with ``args`` (``bash script.sh ARGS``; None: not known) on
    ``machine`` (``bash.pure.Machine``: the node's GPUs, for ``nvidia-smi``)."""
    p = Path(path)
    try:
        with open(p, encoding='utf-8', newline='') as f:
            text = f.read()  # as bash reads it: a CR before LF stays in the line
    except FileNotFoundError:
        raise GuardError(f'{p}: no such file; pass a launcher script, a config file, or a command after --') from None
    except (OSError, UnicodeDecodeError) as e:
        raise GuardError(f'{p}: cannot read ({e})') from None
    from .launchers import batch_env, sbatch_directives

    directives = sbatch_directives(text)  # a Slurm batch script: the variables sbatch gives its commands
    if directives:
        environ = {**batch_env(directives), **environ}
    from .bash.pure import Machine

    machine = machine or Machine()
    if machine.gpus is None and str(environ.get('SLURM_GPUS_ON_NODE', '')).isdigit():
        machine = Machine(int(environ['SLURM_GPUS_ON_NODE']), machine.gpu_name)  # the job's --gres=gpu:N
    if machine.nodes is None and str(environ.get('SLURM_JOB_NUM_NODES', '')).isdigit():
        machine = Machine(machine.gpus, machine.gpu_name, int(environ['SLURM_JOB_NUM_NODES']))  # #SBATCH --nodes
    from .launchers import job_step

    cmds = read_script(text, environ, source=str(p), args=args, machine=machine, launcher=job_step)
    # `run_py swift rlhf ...`: a wrapper defined where it is not read (its note, by command)
    wrapped = {id(c): note for c in cmds if (note := _unwrap_unknown(c))}
    npu = {id(c): note for c in cmds if (note := ascend_devices(c.env, c.env_lines))}
    # `python -m trl.scripts.vllm_serve --help | grep -q -- --group-port`: a question to the program, not a launch
    kinds = [(c, None if _asks_help(c.argv) else kind_of(c.argv)) for c in cmds]
    trainers = [(c, k) for c, k in kinds if k and k[1] == 'train' and not c.commented]
    # the first trainer a reader reads, a guessed one (`python prep.py` not here, taken for a TRL script) only when
    # nothing surer runs; else the first one none does (the verdict is then never OK)
    read = [(c, k) for c, k in trainers if k[0] not in UNREAD]
    train = next(((c, k) for c, k in read if not _guessed(c.argv)), read[0] if read else None) or (
        trainers[0] if trainers else None
    )
    # the server the trainer talks to: the last one started before it (a script that restarts its server on a new
    # port before each run, arl's sweep), else the first one run, else one quoted in a comment
    servers = [c for c, k in kinds if k and k[1] == 'rollout']
    live = [c for c in servers if not c.commented]
    order = {id(c): i for i, c in enumerate(cmds)}
    before = [c for c in live if train is not None and order[id(c)] < order[id(train[0])]]
    roll = (before[-1] if before else None) or (live[0] if live else None) or (servers[0] if servers else None)
    rollout = None
    if roll is not None:
        where = f'{p}:{roll.line}' + (' (comment)' if roll.commented else '')
        rollout = read_rollout_command(roll, environ, where)
        said = next((x for x in roll.above.splitlines() if _OTHER_MACHINE.search(x)), None)
        if said:
            rollout.remote = f'the script says "{said.strip()[:80]}" above it ({where})'
        elif roll.role_node:
            rollout.remote = (
                f'the script starts it in its other role, on another node ({roll.role}, picks the node; {where})'
            )
        if (
            train is not None
            and not roll.commented
            and not roll.background
            and not roll.role
            and any(c is roll for c in before)
            and os.path.basename(roll.argv[0]) in FOREGROUND_SERVERS
        ):
            rollout.foreground = f'{where}, before the launch at line {train[0].line}'
    if train is None:
        exited = getattr(cmds, 'exited', None)
        if rollout is None and exited and args is None:
            line, status = exited
            raise GuardError(
                f'{p}:{line}: the script ends with exit {status} before any launch command when it is run without '
                f'arguments; check it as you run it: grpo-guard check -- bash {path} ARGS'
            )
        if rollout is None:
            inner = next((c for c in cmds if _runs_an_unknown_script(c)), None)
            if inner is not None:  # `bash "${INNER}" "$@"` with INNER=$1: the launch is in the script it is given
                script = next(w for w in inner.argv[1:] if not w.startswith('-'))
                raise GuardError(
                    f'{p}:{inner.line}: no launch command here; it runs another script, {script}, which is not '
                    f'resolved here: check that script, or this one as you run it: grpo-guard check -- bash {path} '
                    f'ARGS'
                )
            raise GuardError(
                f'{p}: no `swift rlhf`, `swift rollout`, `accelerate launch`, `trl` or `python` command '
                f'found; paste the command after -- instead'
            )
        return None, rollout
    if train[1][0] in UNREAD:
        c = train[0]
        if rollout is None:
            raise _refuse_unread(c.argv, train[1][0], f'{p}:{c.line}')
        return _rollout_launch(rollout, unread_trainer(c.argv, train[1][0], f'{p}:{c.line}')), rollout
    cmd, (framework, _) = train
    from .cluster import check_layout, notes

    try:
        check_layout(cmd, f'{p}:{cmd.line}')  # NPROC_PER_NODE=$SLURM_GPUS_ON_NODE: exit 2, give it with --env
    except GuardError as e:
        raise _with_arguments(e, cmds, args, path) from None
    env = {**environ, **cmd.env}
    from .crlf import crlf_note, lost_continuation
    from .trl.accelerate_cmd import NoScript

    lost_continuation(cmd.argv, f'{p}:{cmd.line}')  # `\` + CR: bash ends the command at that line
    from ..launch import in_dir, other_dir
    from .written import written

    workdir = other_dir(cmd.cwd)  # `cd src` before the launch: its relative paths are read from there, where it is here
    try:
        with written(cmd.files), in_dir(workdir):  # a config the script wrote itself reads as written
            launch = _train_launch(framework, cmd.argv, env, f'{p}:{cmd.line}')
    except NoScript as e:
        following = next((c for c in cmds if c.line > cmd.line and not c.commented), None)
        raise GuardError(e.with_next(' '.join(following.argv) if following else None)) from None
    except GuardError as e:  # a value left unresolved: where the script takes arguments, the way to give them
        raise _with_arguments(e, cmds, args, path) from None
    launch.notes += crlf_note(text, str(p))
    launch.notes += [f'{p}:{cmd.line}: {wrapped[id(cmd)]}'] if id(cmd) in wrapped else []
    launch.notes += [f'{p}:{cmd.line}: {npu[id(cmd)]}'] if id(cmd) in npu else []
    if workdir:
        launch.workdir = workdir
        launch.notes.append(f'{p}:{cmd.line}: read from {launch.workdir}, where the script changes directory first')
    on_node = cmd.env.get('SLURM_GPUS_ON_NODE') or (environ.get('SLURM_GPUS_ON_NODE') if directives else None)
    if str(on_node or '').isdigit() and hasattr(launch, 'node_gpus'):
        # #SBATCH --gres=gpu:N, or the job step's own (`sbatch --gpus=3 --wrap=...`): the node's GPUs
        launch.node_gpus = int(on_node)
    sweep = [c for c in cmds if not c.commented and (kind_of(c.argv) or ('', ''))[1] == 'train' and c.loops]
    launch.notes += notes(cmd, f'{p}:{cmd.line}', len(sweep))
    if cmd.defaults:  # `${DATASETS:-}` with DATASETS set nowhere here: empty here, the user's environment gives it
        shown = cmd.defaults[:4] + ([f'and {len(cmd.defaults) - 4} more'] if len(cmd.defaults) > 4 else [])
        launch.notes.append(
            f'{p}:{cmd.line}: {DEFAULTS_TAKEN} {", ".join(shown)} (set nowhere here); check with yours: '
            + ' '.join(f'--env {d[1:]}=VALUE' for d in cmd.defaults[:4])
        )
    if launch.config_file == '<command line>':
        launch.config_file = f'{p}:{cmd.line}'
    launch.alloc = _alloc(
        environ,
        cmd.env,
        {k: f'{p}:{n} ({"prefix" if n == cmd.line else "export"})' for k, n in cmd.env_lines.items()},
        launch,
        f'{p}:{cmd.line}',
    )
    return launch, rollout


def _unwrap_unknown(cmd: Command) -> str | None:
    """``run_py swift rlhf ...`` where ``run_py`` is defined nowhere the reader could see (a function of a file the
    script sources from another machine) and is no program here, its arguments a launch: the launch it wraps is read
    (``cmd.argv`` without the wrapper), and the note returned says so; None when the command is not such a one."""
    import shutil

    argv = cmd.argv
    if len(argv) < 2 or not re.fullmatch(r'[A-Za-z_][\w-]*', argv[0]) or kind_of(argv) is not None:
        return None
    from .launchers import classify

    if shutil.which(argv[0]) or classify(argv[1:]) is None:  # a program it names (`rsync -ah SRC DST` is none)
        return None
    name, cmd.argv = argv[0], argv[1:]
    return (
        f"{name} is defined nowhere here (a function of a file sourced on the launch's machine?): the command it "
        'runs is read'
    )


ASCEND_DEVICES = 'ASCEND_RT_VISIBLE_DEVICES'
"""The device list of a process on Ascend NPUs (CANN's runtime; torch_npu counts and numbers the NPUs it names, as
CUDA does with ``CUDA_VISIBLE_DEVICES``, and ms-swift's ``get_device_count`` counts them)."""


def ascend_devices(env: dict, lines: dict | None = None) -> str | None:
    """A command that names its NPUs with ``ASCEND_RT_VISIBLE_DEVICES`` and no ``CUDA_VISIBLE_DEVICES``: that list is
    its visible devices (``env`` gains it as ``CUDA_VISIBLE_DEVICES``, the name the rules use; ``lines`` the line
    that set it); the note returned says so. None when the command names no NPUs."""
    if ASCEND_DEVICES not in env or 'CUDA_VISIBLE_DEVICES' in env:
        return None
    env['CUDA_VISIBLE_DEVICES'] = env[ASCEND_DEVICES]
    if lines is not None and ASCEND_DEVICES in lines:
        lines['CUDA_VISIBLE_DEVICES'] = lines[ASCEND_DEVICES]
    return (
        f'{ASCEND_DEVICES}={env[ASCEND_DEVICES]}: Ascend NPUs, read as the visible devices (CUDA_VISIBLE_DEVICES '
        "below); memory is planned for the --gpu-type card, a CUDA GPU's allocator and context"
    )


def _asks_help(argv: list[str]) -> bool:
    """A command that only prints its help or version (``--help``, ``-h``, ``--version``): argparse exits there."""
    return any(w in ('--help', '-h', '--version') for w in argv[1:])


def _rollout_launch(roll: Rollout | None, unread: str | None = None) -> Launch:
    """The Launch of a rollout server checked on its own (``unread``: why the trainer beside it was not read)."""
    launch = Launch(
        argv=[],
        env={k: v for k, v in (roll.env if roll else {}).items() if k in LAUNCH_ENV_KEYS},
        config_file=roll.source if roll else None,
        framework=roll.framework if roll else 'swift',
    )
    launch.kind = 'rollout'
    launch.unread_trainer = unread
    if unread:
        launch.notes.append(f'only the rollout server is read: {unread}')
    return launch


def _alloc(environ, command_env, sources, launch: Launch, script_line: str | None = None):
    """The allocator variables of the training process (allocconf.read_setting)."""
    from ..allocconf import read_setting

    return read_setting(environ, command_env, sources, launch.file_env, launch.config_file, script_line)


def _inner_command(env: dict[str, str], argv: list[str], environ: Mapping[str, str]) -> tuple[dict, list[str]]:
    """``bash -c 'cd x && accelerate launch ...'`` -> the first command the guard reads, with its environment."""
    from .bash.wrappers import shell_c

    text = shell_c(argv)
    if text is None:
        return env, argv
    cmds = read_script(text, {**environ, **env}, source='bash -c')
    cmd = next((c for c in cmds if kind_of(c.argv)), cmds[0] if cmds else Command(argv=argv))
    return {**env, **cmd.env}, cmd.argv


# Launcher scripts by name: bash scripts and Slurm/PBS batch scripts (read as bash reads them, #SBATCH lines included)
SCRIPT_SUFFIXES = ('.sh', '.bash', '.slurm', '.sbatch', '.pbs', '.job')


def is_script(name: str) -> bool:
    """A launcher script: a name with a script suffix, or an existing file without a config suffix that starts with a
    shell's ``#!`` line (``train``, ``run_grpo``)."""
    if name.lower().endswith(SCRIPT_SUFFIXES):
        return True
    if name.lower().endswith(('.yaml', '.yml', '.json', '.py')) or not os.path.isfile(name):
        return False
    try:
        with open(name, 'rb') as f:
            first = f.readline(200)
    except OSError:
        return False
    return first.startswith(b'#!') and re.search(rb'\b(ba|z|k|da)?sh\b', first) is not None


def _runs_an_unknown_script(c) -> bool:
    """A command of a script that runs another script whose name is not resolved here (``bash "$INNER" "$@"``,
    ``sh $1``): the launch may be in it."""
    from .bash.evaluator import SHELLS

    if c.commented or not c.argv or c.argv[0].rsplit('/', 1)[-1] not in SHELLS:
        return False
    words = [w for w in c.argv[1:] if not w.startswith('-')]
    return bool(words) and words[0] != '-c' and any(u in words[0] for u in c.unresolved)


def _script_call(args: list[str]) -> tuple[dict, str, list[str]] | None:
    """``[VAR=v ...] bash|sh [-flags] script.sh ARGS`` -> (the assignments, the script, its arguments), else None."""
    env, rest = split_env(args)
    if not rest or rest[0].rsplit('/', 1)[-1] not in ('bash', 'sh'):
        return None
    i = 1
    while i < len(rest) and rest[i].startswith('-') and rest[i] not in ('-c', '--'):
        i += 1  # bash -x, -e, -l: options of the shell
    if i < len(rest) and rest[i] == '--':
        i += 1
    if i >= len(rest) or rest[i] == '-c' or not is_script(rest[i]):
        return None
    return env, rest[i], rest[i + 1 :]


def read_launch(
    args: list[str], environ: Mapping[str, str] | None = None, rollout: str | None = None, machine=None
) -> Launch:
    """Everything after ``grpo-guard check``'s own options -> one Launch (``launch.rollout`` set in server
    mode when the rollout command is known). A rollout server on its own gives a Launch whose
    ``argv`` is empty and whose ``rollout`` is set (``Launch.kind == 'rollout'``). A script is read with the
    arguments ``bash script.sh ARGS`` gives it; ``machine`` (``bash.pure.Machine``) is the node it is checked for."""
    environ = dict(os.environ if environ is None else environ)
    args = list(args)
    if args[:1] == ['--']:
        args = args[1:]
    if not args:
        raise GuardError(
            'give a CONFIG file, a launcher script, or a command line after `--` '
            '(e.g. -- swift rlhf --rlhf_type grpo ...)'
        )
    roll, unread = None, None
    call = _script_call(args)
    if is_script(args[0]):
        launch, roll = _from_script(args[0], environ, machine=machine)
        if args[1:]:
            if launch is None or launch.kind == 'rollout':
                raise GuardError(f'{args[0]}: extra arguments {args[1:]} but the script has no training command')
            launch.argv += args[1:]
    elif call is not None:  # bash train.sh config.yaml: the script with its own arguments
        env, script, script_args = call
        launch, roll = _from_script(script, {**environ, **env}, args=script_args, machine=machine)
    else:
        env, rest = split_env(args)
        env, rest = _inner_command(env, rest, environ)  # bash -c "accelerate launch ..."
        npu = ascend_devices(env)
        merged = {**environ, **env}
        npu = npu or ascend_devices(merged)  # the NPUs named in the guard's own environment (or --env)
        kind = kind_of(rest, merged)
        if kind is None:
            raise GuardError(
                f'{rest[0] if rest else args[0]}: not a config file (.yaml, .yml, .json), a launcher '
                f'script (.sh) nor a command this guard reads (swift rlhf, swift rollout, accelerate '
                f'launch, python, torchrun, trl grpo, trl vllm-serve)'
            )
        framework, what = kind
        if what == 'rollout':
            launch, roll = None, read_rollout_command(Command(env=env, argv=rest), environ, 'command line')
        elif framework in UNREAD and rollout is not None:
            launch, unread = None, unread_trainer(rest, framework, 'command line')
        else:
            launch = _train_launch(framework, rest, merged, 'command line')
            launch.alloc = _alloc(environ, env, {}, launch)
            launch.notes += [f'command line: {npu}'] if npu else []
    if rollout is not None:
        roll = read_rollout_command(parse_command_text(rollout, '--rollout'), environ, '--rollout')
        if launch is not None and launch.kind == 'rollout':
            launch, unread = None, launch.unread_trainer
    if launch is None:
        launch = _rollout_launch(roll, unread)
    launch.rollout = roll
    return launch
