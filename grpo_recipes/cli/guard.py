"""``grpo-guard``: check a ``swift rlhf`` GRPO launch before it spends a GPU-hour.

    grpo-guard check CONFIG [-- extra swift args]      plan + rules, in well under a second
    grpo-guard run CONFIG [-- extra swift args]        check, then exec `swift rlhf` (refuses on errors)
    grpo-guard [options] -- swift rlhf --flag value ... check + run for a bare command line
    grpo-guard check launcher.sh                       a launcher script as written (its env, its rollout)
    grpo-guard check CONFIG --rollout "CUDA_VISIBLE_DEVICES=6,7 swift rollout ..."   server mode
    grpo-guard check -- swift rollout ...              a rollout server on its own
    grpo-guard check -- accelerate launch ... train_grpo.py --use_vllm ...          a TRL launch
    grpo-guard validate CONFIG [-- extra swift args]   ms-swift's own parser, in a subprocess

Exit status: 0 clean/valid, 1 errors/invalid, 2 usage or input error.
"""
from __future__ import annotations

import argparse
import sys

from ..errors import GuardError
from .common import fail, parse_command, print_json, split_passthrough

EPILOG = '''examples:
  grpo-guard check recipes/examples/qwen2.5-7b-lora-colocate.yaml --gpus 2 --gpu-type A100-80G
  grpo-guard run recipes/examples/qwen2.5-7b-lora-colocate.yaml
  NPROC_PER_NODE=2 grpo-guard -- swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct ...
  grpo-guard validate recipes/examples/qwen2.5-7b-lora-colocate.yaml
  grpo-guard validate recipes/examples/qwen2.5-7b-lora-colocate.yaml -- --num_generations 4
  grpo-guard validate -- swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct ...

exit status: 0 clean/valid, 1 errors/invalid, 2 usage or input error'''


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='grpo-guard', description='Pre-launch guard for ms-swift GRPO '
                                '(`swift rlhf --rlhf_type grpo`).', epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest='cmd', metavar='COMMAND')
    v = sub.add_parser('validate', help="run ms-swift 4.6's own argument parser on a config or command line",
                       description='Run swift.utils.parse_args(RLHFArguments, argv) on the launch, in a '
                       'subprocess, against a config-only model dir. Reports unknown/renamed arguments with '
                       'a suggestion and ms-swift\'s own validation messages.', epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, helptext in (('check', 'derive the launch plan and run every rule (fast; no torch, no ms-swift)'),
                           ('run', 'check, then exec `swift rlhf` with the same argv and environment')):
        c = sub.add_parser(name, help=helptext, description=helptext, epilog=EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        c.add_argument('config', nargs='?', help='swift rlhf YAML/JSON config or a launcher .sh (omit and use '
                       '`-- swift rlhf ...`, `-- accelerate launch ...`)')
        _hardware_args(c)
        c.add_argument('--json', action='store_true', help='print one JSON object (ok, findings, plan, ...)')
        if name == 'run':
            c.add_argument('--force', action='store_true', help='launch even if the check finds errors')
    t = sub.add_parser('trace', help='trace one training step of the launch on fake tensors: the trainer\'s '
                       'memory per category, from the real model code (imports torch; about 10 s for a 7B model)',
                       description='Build the model class from config.json (no weights), add LoRA as the launch '
                       'does, and run forward, the GRPO loss, backward and two AdamW steps on fake tensors, '
                       'counting the bytes autograd and the optimizer keep alive. Prints the traced peak next to '
                       'the analytic memory model\'s figure for the same quantity.')
    t.add_argument('config', nargs='?', help='swift rlhf YAML/JSON config or launcher .sh (or `-- swift rlhf ...`)')
    t.add_argument('--model-config', metavar='DIR', help='a dir holding the model\'s config.json (or the file)')
    t.add_argument('--gpus', type=int, metavar='N', help='physical GPUs per node (for the plan)')
    t.add_argument('--json', action='store_true', help='print one JSON object (traced_peak_gib, model_peak_gib, ...)')
    cal = sub.add_parser('calibrate', help='score the memory model on published measurements (JSON lines)',
                         description='Predict every case of a calibration file (schema: '
                         '../shared/calibration/README.md) and compare with what was observed.')
    cal.add_argument('cases', help='JSON-lines file of cases, e.g. ../shared/calibration/memory_cases.jsonl')
    cal.add_argument('--json', action='store_true', help='print one JSON object')
    v.add_argument('config', nargs='?', help='swift rlhf YAML/JSON config (omit and use `-- swift rlhf ...`)')
    v.add_argument('--json', action='store_true', help='print one JSON object')
    v.add_argument('--timeout', type=float, default=900.0, help='seconds to wait for the parser (default 900)')
    for c in (v, sub.choices['check'], sub.choices['run']):
        c.add_argument('--trl-version', metavar='V', help='TRL launches: the TRL release the launch will run (default: '
                       'the installed one); older releases keep the names they had (e.g. --vllm_device before 0.16)')
    return p


def _hardware_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group('hardware (default: nvidia-smi if present, else unknown)')
    g.add_argument('--gpus', type=int, metavar='N', help='physical GPUs per node')
    g.add_argument('--gpu-type', metavar='T', help='GPU model, e.g. A100-80G, A100-40G, H100, or the name nvidia-smi '
                   'prints ("NVIDIA A100-SXM4-40GB"); a name that could be several cards is refused')
    g.add_argument('--rollout-gpus', metavar='IDS', help='server mode: GPU ids of `swift rollout` (e.g. 4,5)')
    p.add_argument('--data-stats', metavar='JSON', help='`grpo-data stats DATA --json` output: plan memory with '
                   'the data\'s real prompt lengths and check max_length against them')
    g.add_argument('--gpu-mem', type=float, metavar='GIB', help='GPU capacity in GiB as torch reports it '
                   '(overrides the --gpu-type catalogue)')
    p.add_argument('--verify', action='store_true', help='also put the proposed memory fix through ms-swift\'s '
                   'real parser (about 10 s)')
    p.add_argument('--rollout', metavar='CMD', help='server mode: the rollout server\'s command as typed, e.g. '
                   '"CUDA_VISIBLE_DEVICES=6,7 swift rollout --model M --vllm_data_parallel_size 2" (read, never run)')
    p.add_argument('--model-config', metavar='DIR', help='a dir holding the model\'s config.json (or the file) '
                   'when the model is neither local nor in the HF/ModelScope cache')
    p.add_argument('--allow-unchecked', action='store_true', help='exit 0 (and let `run` launch) when the rules '
                   'pass but memory could not be checked (no config.json, unknown GPU)')


def _launch_args(config: str | None, extra: list[str]) -> list[str]:
    """What the user typed: the config or script (if any) and what follows `--`."""
    if config is None and not extra:
        raise GuardError('give a CONFIG file or launcher script, or a command line after `--` '
                         '(e.g. -- swift rlhf --rlhf_type grpo ...)')
    if config is not None and extra[:2] == ['swift', 'rlhf']:
        extra = extra[2:]
    return ([config] if config else []) + extra


def _model_config(path: str | None) -> dict | None:
    if not path:
        return None
    import json
    from pathlib import Path
    p = Path(path)
    f = p / 'config.json' if p.is_dir() else p
    try:
        return json.loads(f.read_text(encoding='utf-8'))
    except FileNotFoundError:
        raise GuardError(f'--model-config {path}: no config.json there; pass the model dir or its config.json') from None
    except (OSError, ValueError) as e:
        raise GuardError(f'--model-config {path}: not a readable config.json ({e})') from None


def cmd_validate(opts, extra: list[str]) -> int:
    from ..launch import load_launch
    from ..realparse import validate
    launch = load_launch(_launch_args(opts.config, extra))
    result = validate(launch, timeout=opts.timeout, trl_version=opts.trl_version)
    if opts.json:
        print_json({'ok': result.ok, 'launch': launch.to_dict(), 'parser': result.to_dict()})
        return 0 if result.ok else 1
    from rich.console import Console
    from rich.markup import escape
    out = Console(highlight=False, soft_wrap=True)
    out.print(f'[bold]config[/]   {launch.config_file}')
    if launch.env:
        out.print('[bold]env[/]      ' + ' '.join(f'{k}={v}' for k, v in launch.env.items()))
    for note in launch.notes:
        out.print(f'[yellow]note[/]     {note}')
    sim = f', simulated: {", ".join(result.simulated)}' if result.simulated else ''
    out.print(f'[bold]parser[/]   {result.parser}, world_size {result.world_size}{sim} '
              f'({result.total_s:.1f}s)')
    for u in result.unknown:
        out.print(f'[red]unknown[/]  {u["describe"]}')
    if result.ok and launch.framework == 'trl':
        r = result.resolved
        keys = (('model', 'tensor_parallel_size', 'data_parallel_size', 'gpu_memory_utilization', 'max_model_len')
                if launch.kind == 'rollout' else ('generation_batch_size', 'steps_per_generation', 'num_generations',
                                                  'use_vllm', 'vllm_mode', 'dtype', 'use_peft'))
        out.print('[green bold]VALID[/]    ' + escape(', '.join(f'{k}={r[k]}' for k in keys if k in r)))
        return 0
    if result.ok:
        r = result.resolved
        out.print(f'[green bold]VALID[/]    model_type={r.get("model_type")} template={r.get("template")} '
                  f'tuner={r.get("tuner_type")} dtype={r.get("torch_dtype")} max_length={r.get("max_length")} '
                  f'beta={r.get("beta")}')
        return 0
    out.print(f'[red bold]INVALID[/]  {result.error_type} at {result.where}:')
    out.print(f'         {result.message}')
    return 1


def _check(opts, extra):
    from ..check import check_launch
    from ..hardware import detect
    from ..launch import load_launch
    if opts.gpus is not None and opts.gpus < 1:
        raise GuardError(f'--gpus {opts.gpus}: must be >= 1')
    from ..gpu_names import check_hardware_flags
    check_hardware_flags(opts.gpu_type, opts.gpu_mem)  # exact card names, --gpu-mem > 0
    launch = load_launch(_launch_args(opts.config, extra), rollout=opts.rollout)
    hw = detect(opts.gpus, opts.gpu_type, opts.rollout_gpus, opts.gpu_mem)
    from ..check import load_data_stats
    stats = load_data_stats(opts.data_stats) if opts.data_stats else None
    packages = None
    if getattr(opts, 'trl_version', None):
        from ..check import installed_packages
        from ..rules import version_tuple
        if version_tuple(opts.trl_version) is None:
            raise GuardError(f'--trl-version {opts.trl_version!r}: not a version (e.g. 0.15.2)')
        packages = {**installed_packages(), 'trl': opts.trl_version}
    report = check_launch(launch, hw, packages=packages, data_stats=stats,
                          model_config=_model_config(opts.model_config))
    if getattr(opts, 'verify', False) and report.fixes:
        from ..realparse import validate
        from ..launch import Launch
        fixed = Launch(argv=launch.argv + report.fixes[0].argv(), env=launch.env, file_env=launch.file_env,
                       config_file=launch.config_file)
        result = validate(fixed)
        report.fix_verified = result.to_dict()
    return report


def _checked(opts, extra: list[str]):
    """Run the check and print it (table, or JSON with --json)."""
    report = _check(opts, extra)
    if opts.json:
        print_json(report.to_dict())
    else:
        from .render import print_report
        print_report(report, allow_unchecked=opts.allow_unchecked)
    return report


def cmd_check(opts, extra: list[str]) -> int:
    return _checked(opts, extra).exit_code(opts.allow_unchecked)


def cmd_trace(opts, extra: list[str]) -> int:
    from ..check import check_launch, model_config_for
    from ..hardware import Hardware
    from ..launch import load_launch
    launch = load_launch(_launch_args(opts.config, extra))
    if launch.kind != 'train':
        raise GuardError('trace needs a training launch (a rollout server has no trainer step)')
    report = check_launch(launch, Hardware(gpus=opts.gpus), memory=False)
    mc, why = model_config_for(report.cfg.model, _model_config(opts.model_config))
    if mc is None:
        raise GuardError(why)
    from ..arch import Arch
    from ..memplan import launch_adamw, prompt_bound
    prompt_len, why_prompt, _ = prompt_bound(report, Arch.from_config(mc), None)
    try:
        from ..trace import trace_launch
    except ImportError as e:
        raise GuardError(f'trace needs torch, transformers and peft ({e}); pip install -e .[test]') from None
    adamw, adamw_why = launch_adamw(report)
    try:
        result = trace_launch(report.cfg, report.plan, mc, prompt_len, str(report.cfg.model), adamw, adamw_why)
    except ValueError as e:  # transformers or PEFT cannot build this model or tuner
        raise GuardError(f'trace: cannot build the model as the launch asks ({e})') from None
    if opts.json:
        print_json({**result.to_dict(), 'prompt_len': prompt_len, 'prompt_basis': why_prompt})
        return 0
    print(f'model      {result.model}, {result.shape}, prompts from {why_prompt}')
    print(f'traced     {result.traced_peak_gib:.2f} GiB allocated at the peak ({result.peak_at})')
    for k, v in result.categories_gib.items():
        print(f'  {k:<28} {v:8.2f} GiB')
    if result.model_peak_gib is not None:
        diff = result.model_peak_gib / result.traced_peak_gib - 1 if result.traced_peak_gib else 0.0
        print(f'analytic   {result.model_peak_gib:.2f} GiB (the memory model\'s trainer terms; {diff:+.1%})')
    for n in result.notes:
        print(f'note       {n}')
    print(f'({result.seconds:.1f} s; allocated bytes: the CUDA context, NCCL and the allocator\'s reserve are not '
          f'in it)')
    return 0


def cmd_calibrate(opts) -> int:
    from ..calibrate import load_cases, score
    result = score(load_cases(opts.cases))
    if opts.json:
        print_json(result)
        return 0
    from .render import print_calibration
    print_calibration(result)
    return 0


def cmd_run(opts, extra: list[str]) -> int:
    import os
    import shutil
    report = _checked(opts, extra)
    if report.exit_code(opts.allow_unchecked) and not opts.force:
        why = 'errors above' if not report.ok else 'memory not checked; pass --allow-unchecked'
        print(f'grpo-guard: not launching ({why}); fix them or pass --force', file=sys.stderr)
        return 1
    launch = report.launch
    if launch.kind != 'train' or launch.framework != 'swift' or (opts.config or '').endswith('.sh'):
        raise GuardError('`run` launches `swift rlhf` configs and command lines; start this one yourself '
                         '(the check above passed)')
    swift = shutil.which('swift')
    if swift is None:
        raise GuardError('`swift` is not on PATH; install ms-swift 4.6 (pip install grpo-recipes)')
    args = _launch_args(opts.config, extra)
    from ..frontends.shell import split_env
    env_prefix, args = split_env(args)
    if args[:2] == ['swift', 'rlhf']:
        args = args[2:]
    cmd = [swift, 'rlhf', *args]
    print('grpo-guard: exec ' + ' '.join(cmd), file=sys.stderr, flush=True)
    os.execve(swift, cmd, {**os.environ, **env_prefix})  # swift reads the file and its ENV block itself
    return 0  # not reached


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = ('check', 'run', 'validate', 'calibrate', 'trace')
    first = next((a for a in argv if not a.startswith('-') or a == '--'), None)
    if argv and first == '--' and not any(a in ('-h', '--help') for a in argv[:argv.index('--')]):
        argv = ['run', *argv]  # grpo-guard [options] -- swift rlhf ...: check and run a bare command line
    elif argv and argv[0].startswith('-') and argv[0] not in ('-h', '--help') and first not in commands:
        argv = ['run', *argv]
    ours, extra = split_passthrough(argv)
    opts = parse_command(build_parser(), ours)
    if isinstance(opts, int):
        return opts
    try:
        if opts.cmd == 'validate':
            return cmd_validate(opts, extra)
        if opts.cmd == 'check':
            return cmd_check(opts, extra)
        if opts.cmd == 'run':
            return cmd_run(opts, extra)
        if opts.cmd == 'calibrate':
            return cmd_calibrate(opts)
        if opts.cmd == 'trace':
            return cmd_trace(opts, extra)
    except GuardError as e:
        return fail(str(e), e.exit_code)
    except KeyboardInterrupt:
        return fail('interrupted', 130)
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
    return 2


if __name__ == '__main__':
    sys.exit(main())
