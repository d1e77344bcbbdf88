"""``grpo-guard check`` and ``grpo-guard run``: the plan, the rules and the memory verdicts (and, for ``run``, exec
``swift rlhf`` when they pass)."""

from __future__ import annotations

import os
import re
import shutil
import sys

from ..check import check_launch, installed_packages, load_data_stats
from ..errors import GuardError
from ..frontends import is_script, read_launch
from ..frontends.shell import split_env
from ..hardware import detect
from ..launch import Launch
from ..project_pins import PINNED
from ..realparse import validate
from .common import environ_with, fail, launch_args, model_config_arg, print_json
from .render import print_report


def _recipe_header_hardware(config, hw, rollout_gpus):
    """``# @gpus`` / ``# @gpu_type`` (and ``# @rollout_gpus``) of a recipe's YAML, or of a copy from ``grpo-recipes
    cp``, when nothing else names the hardware (no flags, no nvidia-smi): the card the recipe is planned for, shown as
    ``[recipe header]`` in the plan."""
    from dataclasses import replace
    from pathlib import Path

    from ..recipes import read_meta

    if not config or Path(config).suffix.lower() not in ('.yaml', '.yml') or not Path(config).is_file():
        return hw
    meta = read_meta(Path(config))
    if not str(meta.get('gpus', '')).isdigit() or int(meta['gpus']) < 1 or not meta.get('gpu_type'):
        return hw
    from ..gpu_names import check_hardware_flags
    from ..hardware import parse_gpu_ids

    check_hardware_flags(meta['gpu_type'], None)
    rollout = hw.rollout_gpus
    if rollout_gpus is None and meta.get('rollout_gpus'):
        rollout = parse_gpu_ids(meta['rollout_gpus'], f'{config}: # @rollout_gpus')
    return replace(hw, gpus=int(meta['gpus']), gpu_type=meta['gpu_type'], source='recipe header', rollout_gpus=rollout)


def _check(opts, extra):
    if opts.gpus is not None and opts.gpus < 1:
        raise GuardError(f'--gpus {opts.gpus}: must be >= 1')
    from ..gpu_names import check_hardware_flags

    check_hardware_flags(opts.gpu_type, opts.gpu_mem)  # exact card names, --gpu-mem > 0
    from ..recipe_launcher import recipe_launcher

    environ = environ_with(getattr(opts, 'env', None))  # --env NAME=VALUE: what the cluster sets
    rl = recipe_launcher(opts.config, environ)
    if rl is not None:  # this project's own launcher: the recipe it runs, as its guard step checks it
        a = rl.check_args(opts.gpus, opts.gpu_type, opts.rollout)
        launch = read_launch(a['args'] + extra, environ=a['environ'], rollout=a['rollout'])
        launch.notes.append(a['note'])
        hw = detect(a['gpus'], a['gpu_type'], opts.rollout_gpus, opts.gpu_mem)
        if hw.source == 'flags':
            from dataclasses import replace

            hw = replace(hw, source=a['hw_source'])
    else:
        from ..frontends.bash.pure import Machine

        machine = Machine(opts.gpus, opts.gpu_type)  # what nvidia-smi would list in the script
        launch = read_launch(launch_args(opts.config, extra), environ=environ, rollout=opts.rollout, machine=machine)
        hw = detect(opts.gpus, opts.gpu_type, opts.rollout_gpus, opts.gpu_mem)
        if hw.gpus is None and getattr(launch, 'node_gpus', None):  # a Slurm batch script's --gres=gpu:N
            from dataclasses import replace

            hw = replace(hw, gpus=launch.node_gpus, source='sbatch')
        if hw.gpus is None and opts.gpu_type is None:  # a recipe's YAML (or its copy) names the hardware it is for
            hw = _recipe_header_hardware(opts.config, hw, opts.rollout_gpus)
    stats = load_data_stats(opts.data_stats) if opts.data_stats else None
    packages = _project_pinned(launch, opts)
    for name, option in PINNED.items():  # --trl-version, --swift-version
        if getattr(opts, option, None):
            packages = _with_release(name, getattr(opts, option), packages or installed_packages())
    mean = getattr(opts, 'completion_mean', None)
    pass_rate = getattr(opts, 'pass_rate', None)
    if pass_rate is not None and not 0 <= pass_rate <= 1:  # NaN fails both comparisons
        raise GuardError(f'--pass-rate {pass_rate:g}: a pass rate lies between 0 and 1')
    from contextlib import nullcontext
    from functools import partial

    from .progress import progress

    replay = getattr(opts, 'replay', False)
    # what the launch and a re-check of its fix (--verify) share; --model-config read (or fetched) once
    checked = partial(
        check_launch,
        hw=hw,
        packages=packages,
        data_stats=stats,
        model_config=model_config_arg(opts.model_config),
        completion_mean=mean,
    )
    try:
        with progress('check --replay: tracing the training step at four prompt lengths') if replay else nullcontext():
            report = checked(launch, fastest=getattr(opts, 'fastest', False), pass_rate=pass_rate, replay=replay)
    except OverflowError:  # a number no GPU holds (10**30 completions): the memory arithmetic leaves float range
        raise GuardError(_too_large(launch.argv)) from None
    if getattr(opts, 'verify', False) and report.fixes and report.fixes[0].env:
        from ..memory.envfix import verify  # an environment line: re-plan the launch with it (and parse any arguments)

        report.fix_verified = verify(
            launch,
            report,
            checked,
        )
        if report.fixes[0].changes:
            parsed = validate(
                Launch(
                    argv=launch.argv + report.fixes[0].argv(),
                    env=launch.env,
                    file_env=launch.file_env,
                    config_file=launch.config_file,
                )
            ).to_dict()
            report.fix_verified = {**parsed, **report.fix_verified, 'ok': report.fix_verified['ok'] and parsed['ok']}
    elif getattr(opts, 'verify', False) and report.fixes:
        from ..fix_syntax import fixed_launch

        fixed, outside = fixed_launch(launch, report.fixes[0])  # as the launch's own framework reads it
        result = validate(fixed)
        report.fix_verified = {**result.to_dict(), 'not_parsed': outside}
    return report


def _too_large(argv: list[str]) -> str:
    """Name the arguments whose values are too large to plan with."""
    huge = []
    for i, a in enumerate(argv):
        flag, eq, value = a.partition('=')
        if not eq:
            value = argv[i + 1] if i + 1 < len(argv) and a.startswith('--') else ''
        try:
            big = abs(float(value)) >= 1e15
        except (ValueError, OverflowError):
            big = len(value) > 15 and value.isdigit()
        if a.startswith('--') and big:
            huge.append(flag.lstrip('-'))
    named = ', '.join(dict.fromkeys(huge)) or 'a number in the launch'
    return f'{named}: too large to plan memory with (the arithmetic leaves the float range); use a real value'


def _checked(opts, extra: list[str]):
    """Run the check and print it (table, or JSON with --json)."""
    report = _check(opts, extra)
    if opts.json:
        from .verdict import report_json

        print_json(report_json(report, opts.allow_unchecked))
    else:
        print_report(report, allow_unchecked=opts.allow_unchecked)
    if getattr(opts, 'plot', None):
        from .bars import write_plot  # matplotlib is imported only here

        write_plot(report, opts.plot)
    if report.stop:  # read and planned, but it cannot start here as written: the one line, last
        fail(report.stop, 2)
    if getattr(opts, 'write_fix', None):
        from ..write_fix import write_fix

        print(write_fix(opts.write_fix, launch_args(opts.config, extra), report), file=sys.stderr)
    return report


def run_check(opts, extra: list[str]) -> int:
    return _checked(opts, extra).exit_code(opts.allow_unchecked)


def run_run(opts, extra: list[str]) -> int:
    report = _checked(opts, extra)
    if report.exit_code(opts.allow_unchecked) and (not opts.force or report.stop):
        from .verdict import not_launching

        print(not_launching(report), file=sys.stderr)
        return 1
    launch = report.launch
    if launch.kind != 'train' or not launch.fw.runnable or is_script(opts.config or ''):
        raise GuardError(
            '`run` launches `swift rlhf` configs and command lines; start this one yourself (the check above passed)'
        )
    swift = shutil.which('swift')
    if swift is None:
        raise GuardError('`swift` is not on PATH; install ms-swift 4.6 (pip install grpo-recipes)')
    args = launch_args(opts.config, extra)
    env_prefix, args = split_env(args)
    if args[:2] == ['swift', 'rlhf']:
        args = args[2:]
    cmd = [swift, 'rlhf', *args]
    print('grpo-guard: exec ' + ' '.join(cmd), file=sys.stderr, flush=True)
    os.execve(swift, cmd, {**os.environ, **env_prefix})  # swift reads the file and its ENV block itself
    return 0  # not reached


def _flag(name: str) -> str:
    """The ``check`` option that names ``name``'s release (``trl_version`` -> ``--trl-version``)."""
    return '--' + PINNED[name].replace('_', '-')


def _with_release(name: str, version: str, packages: dict) -> dict:
    """``packages`` with ``name`` at ``version``, as its option (``project_pins.PINNED``) gives it: the front end
    whose ``Framework.package`` it is judges whether it can read that release (``Framework.pin_release``)."""
    from ..frontends import FRAMEWORKS

    fw = next(f for f in FRAMEWORKS.values() if f.package == name)
    return fw.call('pin_release', version, packages)


def _project_pinned(launch, opts) -> dict | None:
    """The installed packages with the TRL / ms-swift releases the launch's project pins (``project_pins``) in place
    of theirs, a note naming each; None when it pins none that differ (or a flag names the release)."""
    from ..project_pins import project_pins

    where = re.sub(r':\d+$', '', str(launch.config_file or ''))
    starts = [p for p in (where, getattr(launch, 'workdir', None), os.getcwd()) if p and os.path.exists(p)]
    installed = installed_packages()
    taken = {
        name: pin
        for name, pin in project_pins(starts).items()
        if not getattr(opts, PINNED[name], None) and installed.get(name) != pin[0]
    }
    packages = None
    for name, (version, source) in taken.items():
        try:
            packages = _with_release(name, version, packages or installed)
        except GuardError:
            continue  # a release the guard does not judge: the installed one, as without the pin
        launch.notes.append(f'{source}: pins {name} {version}; judged as {name} {version} ({_flag(name)} overrides)')
    return packages
