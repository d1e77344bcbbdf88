"""Launch readers, one per framework, all producing the one typed :class:`~grpo_recipes.launch.Launch`.

    shell.py   VAR=value / env / export prefixes and whole launcher scripts -> commands (never run)
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
from ..launch import CONFIG_SUFFIXES, LAUNCH_ENV_KEYS, Launch, Rollout
from .shell import Command, parse_command_text, read_script, split_env
from .swift.reader import load_swift, read_rollout
from .trl.reader import load_trl, read_vllm_serve

TRL_LAUNCHERS = ('accelerate', 'python', 'python3', 'torchrun', 'trl', 'deepspeed')


def kind_of(argv: list[str]) -> tuple[str, str] | None:
    """(framework, 'train' | 'rollout') of a command's argv, or None if it is neither."""
    if not argv:
        return None
    head = os.path.basename(argv[0])
    swift = head == 'swift' or head.endswith(('_swift', '-swift'))  # a wrapper named after it (tests' stand-in)
    if swift and argv[1:2] == ['rlhf']:
        return 'swift', 'train'
    if swift and argv[1:2] == ['rollout']:
        return 'swift', 'rollout'
    if head == 'trl' and argv[1:2] == ['vllm-serve']:
        return 'trl', 'rollout'
    if head == 'trl' and argv[1:2] == ['grpo']:
        return 'trl', 'train'
    from .swift.entry import entry_index
    if entry_index(argv) is not None:  # deepspeed/torchrun/python running ms-swift's swift/cli/rlhf.py
        return 'swift', 'train'
    if head == 'accelerate' and argv[1:2] == ['launch']:
        return 'trl', 'train'
    if head in ('torchrun', 'deepspeed'):
        return 'trl', 'train'
    if head.startswith('python') and len(argv) > 1:
        if argv[1:3] == ['-m', 'swift.cli.rlhf']:
            return 'swift', 'train'
        if argv[1:3] == ['-m', 'trl.scripts.vllm_serve']:
            return 'trl', 'rollout'
        return 'trl', 'train'
    if argv[0].endswith(CONFIG_SUFFIXES) or argv[0].startswith('-'):
        return 'swift', 'train'  # what follows `swift rlhf`
    return None


def read_rollout_command(cmd: Command, environ: Mapping[str, str], source: str) -> Rollout:
    kind = kind_of(cmd.argv)
    if kind is None or kind[1] != 'rollout':
        raise GuardError(f'{source}: {" ".join(cmd.argv[:3])} is not a rollout server command; expected '
                         f'`swift rollout ...` or `trl vllm-serve ...`')
    env = {**{k: v for k, v in environ.items() if k == 'CUDA_VISIBLE_DEVICES'}, **cmd.env}
    if kind[0] == 'swift':
        return read_rollout(cmd.argv, env, source)
    return read_vllm_serve(cmd.argv, env, source)


def _train_launch(framework: str, argv: list[str], env: Mapping[str, str], source: str) -> Launch:
    if framework == 'swift':
        from .swift.entry import load_swift_entry
        return load_swift_entry(argv, env, source) or load_swift(argv, env)
    return load_trl(argv, env, source)


# A comment above a rollout command that puts it on another machine: ms-swift's examples write
# "# run in another node" (external/grpo_32b_full.sh). A node number alone ("# node 0") does not say which node
# the trainer is on, so it is not read as one.
_OTHER_MACHINE = re.compile(r'\b(?:another|other|separate|different|remote|second)\s+(?:node|machine|host|server)s?\b',
                            re.I)


def _from_script(path: str, environ: Mapping[str, str]) -> tuple[Launch | None, Rollout | None]:
    p = Path(path)
    try:
        with open(p, encoding='utf-8', newline='') as f:
            text = f.read()  # as bash reads it: a CR before LF stays in the line
    except FileNotFoundError:
        raise GuardError(f'{p}: no such file; pass a launcher script, a config file, or a command after --') from None
    except (OSError, UnicodeDecodeError) as e:
        raise GuardError(f'{p}: cannot read ({e})') from None
    cmds = read_script(text, environ, source=str(p))
    train = next(((c, kind_of(c.argv)) for c in cmds if not c.commented and (kind_of(c.argv) or ('', ''))[1]
                  == 'train'), None)
    roll = next((c for c in cmds if (kind_of(c.argv) or ('', ''))[1] == 'rollout' and not c.commented), None) or \
        next((c for c in cmds if (kind_of(c.argv) or ('', ''))[1] == 'rollout'), None)
    rollout = None
    if roll is not None:
        where = f'{p}:{roll.line}' + (' (comment)' if roll.commented else '')
        rollout = read_rollout_command(roll, environ, where)
        said = next((x for x in roll.above.splitlines() if _OTHER_MACHINE.search(x)), None)
        if said:
            rollout.remote = f'the script says "{said.strip()[:80]}" above it ({where})'
    if train is None:
        if rollout is None:
            raise GuardError(f'{p}: no `swift rlhf`, `swift rollout`, `accelerate launch`, `trl` or `python` command '
                             f'found; paste the command after -- instead')
        return None, rollout
    cmd, (framework, _) = train
    from .cluster import check_layout, notes
    check_layout(cmd, f'{p}:{cmd.line}')  # NPROC_PER_NODE=$SLURM_GPUS_ON_NODE: exit 2, give it with --env
    env = {**environ, **cmd.env}
    from .trl.accelerate_cmd import NoScript
    from .crlf import crlf_note, lost_continuation
    lost_continuation(cmd.argv, f'{p}:{cmd.line}')  # `\` + CR: bash ends the command at that line
    try:
        from .swift.entry import entry_index
        swift_argv = cmd.argv if entry_index(cmd.argv) is not None else cmd.argv[2:]  # swift/cli/rlhf.py: whole
        launch = _train_launch(framework, cmd.argv if framework != 'swift' else swift_argv, env, f'{p}:{cmd.line}')
    except NoScript as e:
        following = next((c for c in cmds if c.line > cmd.line and not c.commented), None)
        raise GuardError(e.with_next(' '.join(following.argv) if following else None)) from None
    launch.notes += crlf_note(text, str(p))
    sweep = [c for c in cmds if not c.commented and (kind_of(c.argv) or ('', ''))[1] == 'train' and c.loops]
    launch.notes += notes(cmd, f'{p}:{cmd.line}', len(sweep))
    if launch.config_file == '<command line>':
        launch.config_file = f'{p}:{cmd.line}'
    launch.alloc = _alloc(environ, cmd.env, {k: f'{p}:{n} ({"prefix" if n == cmd.line else "export"})'
                                             for k, n in cmd.env_lines.items()}, launch, f'{p}:{cmd.line}')
    return launch, rollout


def _alloc(environ, command_env, sources, launch: Launch, script_line: str | None = None):
    """The allocator variables of the training process (allocconf.read_setting)."""
    from ..allocconf import read_setting
    return read_setting(environ, command_env, sources, launch.file_env, launch.config_file, script_line)


def _inner_command(env: dict[str, str], argv: list[str], environ: Mapping[str, str]) -> tuple[dict, list[str]]:
    """``bash -c 'cd x && accelerate launch ...'`` -> the first command the guard reads, with its environment."""
    from .shell_expand import shell_c
    text = shell_c(argv)
    if text is None:
        return env, argv
    cmds = read_script(text, {**environ, **env}, source='bash -c')
    cmd = next((c for c in cmds if kind_of(c.argv)), cmds[0] if cmds else Command(argv=argv))
    return {**env, **cmd.env}, cmd.argv


def read_launch(args: list[str], environ: Mapping[str, str] | None = None,
                rollout: str | None = None) -> Launch:
    """Everything after ``grpo-guard check``'s own options -> one Launch (``launch.rollout`` set in server
    mode when the rollout command is known). A rollout server on its own gives a Launch whose
    ``argv`` is empty and whose ``rollout`` is set (``Launch.kind == 'rollout'``)."""
    environ = dict(os.environ if environ is None else environ)
    args = list(args)
    if args[:1] == ['--']:
        args = args[1:]
    if not args:
        raise GuardError('give a CONFIG file, a launcher script, or a command line after `--` '
                         '(e.g. -- swift rlhf --rlhf_type grpo ...)')
    roll = None
    if args[0].endswith('.sh'):
        launch, roll = _from_script(args[0], environ)
        if args[1:]:
            if launch is None:
                raise GuardError(f'{args[0]}: extra arguments {args[1:]} but the script has no training command')
            launch.argv += args[1:]
    else:
        env, rest = split_env(args)
        env, rest = _inner_command(env, rest, environ)  # bash -c "accelerate launch ..."
        merged = {**environ, **env}
        kind = kind_of(rest)
        if kind is None:
            raise GuardError(f'{rest[0] if rest else args[0]}: not a config file (.yaml, .yml, .json), a launcher '
                             f'script (.sh) nor a command this guard reads (swift rlhf, swift rollout, accelerate '
                             f'launch, python, torchrun, trl grpo, trl vllm-serve)')
        framework, what = kind
        if what == 'rollout':
            launch, roll = None, read_rollout_command(Command(env=env, argv=rest), environ, 'command line')
        else:
            argv = rest[2:] if rest[:2] == ['swift', 'rlhf'] else rest
            launch = _train_launch(framework, argv, merged, 'command line')
            launch.alloc = _alloc(environ, env, {}, launch)
    if rollout is not None:
        roll = read_rollout_command(parse_command_text(rollout, '--rollout'), environ, '--rollout')
    if launch is None:
        launch = Launch(argv=[], env={k: v for k, v in (roll.env if roll else {}).items() if k in LAUNCH_ENV_KEYS},
                        config_file=roll.source if roll else None, framework=roll.framework if roll else 'swift')
        launch.kind = 'rollout'
    launch.rollout = roll
    return launch
