"""``grpo-guard validate``: the framework's own parser on the launch, in a subprocess."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from ..frontends import read_launch
from ..realparse import validate
from .common import environ_with, launch_args, model_config_arg, print_json


def run(opts, extra: list[str]) -> int:
    model_config = model_config_arg(opts.model_config)  # read first: a bad path is one line, before any parse
    launch = read_launch(launch_args(opts.config, extra), environ=environ_with(opts.env))
    from ..frontends.launcher_count import apply_default_processes  # one process per visible GPU, as check counts

    apply_default_processes(launch, opts.gpus)
    if opts.swift_version and launch.fw.swift_release:
        from ..frontends.swift.versions import require_installed

        require_installed(opts.swift_version)
    from .progress import progress

    with progress(f"validate: running {launch.fw.display}'s own parser"):
        result = validate(launch, timeout=opts.timeout, trl_version=opts.trl_version, model_config=model_config)
    if opts.json:
        print_json({'ok': result.ok, 'launch': launch.to_dict(), 'parser': result.to_dict()})
        return 0 if result.ok else 1
    out = Console(highlight=False, soft_wrap=True)
    out.print(f'[bold]config[/]   {launch.config_file}')
    if launch.env:
        out.print('[bold]env[/]      ' + ' '.join(f'{k}={v}' for k, v in launch.env.items()))
    for note in launch.notes:
        out.print(f'[yellow]note[/]     {note}')
    sim = f', simulated: {", ".join(result.simulated)}' if result.simulated else ''
    out.print(f'[bold]parser[/]   {result.parser}, world_size {result.world_size}{sim} ({result.total_s:.1f}s)')
    for u in result.unknown:
        out.print(f'[red]unknown[/]  {u["describe"]}')
    if result.ok and launch.fw.shows_resolved:
        r = result.resolved
        keys = (
            ('model', 'tensor_parallel_size', 'data_parallel_size', 'gpu_memory_utilization', 'max_model_len')
            if launch.kind == 'rollout'
            else (
                'generation_batch_size',
                'steps_per_generation',
                'num_generations',
                'use_vllm',
                'vllm_mode',
                'dtype',
                'use_peft',
            )
        )
        out.print('[green bold]VALID[/]    ' + escape(', '.join(f'{k}={r[k]}' for k in keys if k in r)))
        return 0
    if result.ok:
        r = result.resolved
        out.print(
            f'[green bold]VALID[/]    model_type={r.get("model_type")} template={r.get("template")} '
            f'tuner={r.get("tuner_type")} dtype={r.get("torch_dtype")} max_length={r.get("max_length")} '
            f'beta={r.get("beta")}'
        )
        return 0
    out.print(f'[red bold]INVALID[/]  {result.error_type} at {result.where}:')
    out.print(f'         {result.message}')
    return 1
