"""``grpo-guard``: check a ``swift rlhf`` GRPO launch before it spends a GPU-hour.

    grpo-guard validate CONFIG [-- extra swift args]   ms-swift's own parser, in a subprocess
    grpo-guard validate -- swift rlhf --flag value ... the same for a bare command line

Exit status: 0 valid, 1 invalid, 2 usage or input error.
"""
from __future__ import annotations

import argparse
import sys

from ..errors import GuardError
from .common import fail, print_json, split_passthrough

EPILOG = '''examples:
  grpo-guard validate recipes/examples/qwen2.5-7b-lora-colocate.yaml
  grpo-guard validate recipes/examples/qwen2.5-7b-lora-colocate.yaml -- --num_generations 4
  grpo-guard validate -- swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct ...

exit status: 0 valid, 1 invalid, 2 usage or input error'''


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
    v.add_argument('config', nargs='?', help='swift rlhf YAML/JSON config (omit and use `-- swift rlhf ...`)')
    v.add_argument('--json', action='store_true', help='print one JSON object')
    v.add_argument('--timeout', type=float, default=900.0, help='seconds to wait for the parser (default 900)')
    return p


def _launch_args(config: str | None, extra: list[str]) -> list[str]:
    if config is None and not extra:
        raise GuardError('give a CONFIG file, or a command line after `--` (e.g. -- swift rlhf --rlhf_type grpo ...)')
    return ([config] if config else []) + extra


def cmd_validate(opts, extra: list[str]) -> int:
    from ..launch import load_launch
    from ..realparse import validate
    launch = load_launch(_launch_args(opts.config, extra))
    result = validate(launch, timeout=opts.timeout)
    if opts.json:
        print_json({'ok': result.ok, 'launch': launch.to_dict(), 'parser': result.to_dict()})
        return 0 if result.ok else 1
    from rich.console import Console
    out = Console(highlight=False, soft_wrap=True)
    out.print(f'[bold]config[/]   {launch.config_file}')
    if launch.env:
        out.print('[bold]env[/]      ' + ' '.join(f'{k}={v}' for k, v in launch.env.items()))
    for note in launch.notes:
        out.print(f'[yellow]note[/]     {note}')
    sim = f', simulated: {", ".join(result.simulated)}' if result.simulated else ''
    out.print(f'[bold]parser[/]   ms-swift RLHFArguments, world_size {result.world_size}{sim} '
              f'({result.total_s:.1f}s)')
    for u in result.unknown:
        out.print(f'[red]unknown[/]  {u["describe"]}')
    if result.ok:
        r = result.resolved
        out.print(f'[green bold]VALID[/]    model_type={r.get("model_type")} template={r.get("template")} '
                  f'tuner={r.get("tuner_type")} dtype={r.get("torch_dtype")} max_length={r.get("max_length")} '
                  f'beta={r.get("beta")}')
        return 0
    out.print(f'[red bold]INVALID[/]  {result.error_type} at {result.where}:')
    out.print(f'         {result.message}')
    return 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, extra = split_passthrough(argv)
    parser = build_parser()
    try:
        opts = parser.parse_args(ours)
    except SystemExit as e:
        return int(e.code or 0) if e.code in (0, None) else 2
    if opts.cmd is None:
        parser.print_help()
        return 2
    try:
        if opts.cmd == 'validate':
            return cmd_validate(opts, extra)
    except GuardError as e:
        return fail(str(e), e.exit_code)
    except KeyboardInterrupt:
        return fail('interrupted', 130)
    return 2


if __name__ == '__main__':
    sys.exit(main())
