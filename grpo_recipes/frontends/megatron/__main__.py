"""``python -m grpo_recipes.frontends.megatron [--gpus N --gpu-type T] [--swift-version V] [--json] -- megatron rlhf
...`` (or a config file): read and check one Megatron GRPO launch on its own, until check.py dispatches it.
Exit status: 0 accepted, 1 errors in the launch, 2 bad input (one line on stderr)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ...errors import GuardError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog='python -m grpo_recipes.frontends.megatron', description=__doc__.splitlines()[0])
    ap.add_argument('--gpus', type=int)
    ap.add_argument('--gpu-type')
    ap.add_argument('--gpu-mem', type=float)
    ap.add_argument('--swift-version')
    ap.add_argument('--prompt-len', type=int, help="the data's longest prompt in tokens")
    ap.add_argument('--json', action='store_true')
    ap.add_argument('launch', nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    rest = a.launch[1:] if a.launch[:1] == ['--'] else a.launch
    from ...gpu_names import check_hardware_flags
    from ...hardware import Hardware
    from . import check, read, report

    try:
        check_hardware_flags(a.gpu_type, a.gpu_mem)
        if not rest:
            raise GuardError('give a `megatron rlhf ...` command after --, or a YAML/JSON config')
        env, i = {}, 0
        while i < len(rest) and '=' in rest[i] and not rest[i].startswith('-') and rest[i].split('=')[0].isidentifier():
            k, v = rest[i].split('=', 1)
            env[k] = v
            i += 1
        launch = read(rest[i:], {**os.environ, **env}, 'command line', a.swift_version)
        hw = Hardware(
            gpus=a.gpus,
            gpu_type=a.gpu_type,
            source='flags' if a.gpus or a.gpu_type else 'unknown',
            gpu_mem_gib=a.gpu_mem,
        )
        findings, plan, mem = check(launch, hw, prompt_len=a.prompt_len)
        if mem is not None:
            from . import _model_config
            from .search import search, with_fixes

            findings = with_fixes(
                findings, search(launch, hw, _model_config(launch, None)[0], None, a.prompt_len), launch
            )
    except GuardError as e:
        print(f'error: {e}', file=sys.stderr)
        return e.exit_code
    rep = report(launch, findings, plan, mem)
    if a.json:
        print(json.dumps(rep, indent=1))
    else:
        for f in findings:
            print(f'{f.severity:7} {f.rule}: {f.message}' + (f'\n        fix: {f.fix}' if f.fix else ''))
        p = plan
        print(
            f'plan: world {p["world_size"]} = {p["parallel"]}, global {p["global_batch"]} completions, micro '
            f'{p["micro_batch"]}, {p["num_microbatches"]} micro-batches/step, steps_per_generation '
            f'{p["steps_per_generation"]}, {p["prompts_per_rollout"]} prompts/rollout, '
            f'{p["prompts_per_optimizer_step"]} prompts/step'
        )
        if mem:
            print(
                'memory per GPU (GiB): '
                + ', '.join(f'{k} {v}' for k, v in mem['phases'].items())
                + f' of {mem["capacity_gib"]} (peak: {mem["peak_phase"]})'
            )
    return 0 if rep['ok'] else 1


if __name__ == '__main__':
    sys.exit(main())
