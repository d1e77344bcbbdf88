"""``grpo-guard trace``: the launch's training step on fake tensors, beside the analytic trainer terms."""

from __future__ import annotations

import sys

from ..check import check_launch, model_config_for
from ..errors import GuardError, InvalidLaunch
from ..frontends import read_launch
from ..hardware import Hardware
from ..memory.arch import Arch
from ..memory.verdicts import launch_adamw, prompt_bound
from .common import launch_args, model_config_arg, print_json


def run(opts, extra: list[str]) -> int:
    launch = read_launch(launch_args(opts.config, extra))
    if launch.kind != 'train':
        raise GuardError('trace needs a training launch (a rollout server has no trainer step)')
    report = check_launch(launch, Hardware(gpus=opts.gpus), memory=False)
    errors = [f for f in report.findings if f.severity == 'error']
    if errors and not opts.force:  # a launch check refuses is no step to trace: say why, as check does
        raise InvalidLaunch(
            f'the check finds {len(errors)} error(s): '
            + '; '.join(f'{f.rule}: {f.message}' for f in errors)
            + ' (grpo-guard check shows the fixes; --force traces it anyway)'
        )
    if errors:
        print(
            f'trace: tracing anyway (--force) despite {len(errors)} error(s) grpo-guard check reports', file=sys.stderr
        )
    mc, why = model_config_for(report.cfg.model, model_config_arg(opts.model_config))
    if mc is None:
        raise GuardError(why)
    prompt_len, why_prompt, _ = prompt_bound(report, Arch.from_config(mc), None)
    from .progress import progress

    with progress('trace: importing torch and transformers') as bar:
        try:
            from ..memory.trace import build_error, trace_launch
        except ImportError as e:
            raise GuardError(f'trace needs torch, transformers and peft ({e}); pip install -e .[test]') from None
        adamw, adamw_why = launch_adamw(report)
        bar.set(f'trace: {report.cfg.model}, one training step on fake tensors')
        try:
            from ..allocconf import phases  # the trainer's allocator, for the reserved figure

            cfg = report.cfg
            alloc = phases(launch.alloc, launch.fw, cfg.use_vllm, cfg.vllm_mode, cfg.effective_sleep_level).trainer
            result = trace_launch(
                cfg,
                report.plan,
                mc,
                prompt_len,
                str(cfg.model),
                adamw,
                adamw_why,
                alloc_conf=alloc,
                framework=launch.fw,
            )
        except ValueError as e:  # transformers or PEFT cannot build this model or tuner
            raise GuardError(f'trace: cannot build the model as the launch asks ({build_error(e)})') from None
        except (OverflowError, TypeError) as e:  # a length or batch no tensor can have (torch: "Overflow when ...")
            if not isinstance(e, OverflowError) and 'Overflow' not in str(e):
                raise
            raise GuardError(
                f'trace: a length or batch size of the launch is too large for a tensor '
                f'({str(e).splitlines()[0]}); use a real value'
            ) from None
    if getattr(opts, 'snapshot', None):
        from ..memory.snapshot import write_snapshot

        try:
            write_snapshot(opts.snapshot, result.events, result.event_stages, alloc)
        except OSError as e:
            raise GuardError(f'--snapshot {opts.snapshot}: {e.strerror or e}') from None
        print(
            f'trace: wrote {opts.snapshot} (PyTorch memory snapshot; open it in https://pytorch.org/memory_viz)',
            file=sys.stderr,
        )
    if opts.json:
        print_json({**result.to_dict(), 'prompt_len': prompt_len, 'prompt_basis': why_prompt})
        return 0
    print(f'model      {result.model}, {result.shape}, prompts from {why_prompt}')
    print(f'traced     {result.traced_peak_gib:.2f} GiB allocated at the peak ({result.peak_at})')
    for k, v in result.categories_gib.items():
        print(f'  {k:<28} {v:8.2f} GiB')
    print(
        f'reserved   {result.reserved_peak_gib:.2f} GiB (the same allocations through the caching-allocator model, '
        f'{result.allocator or "default allocator"}; no CUDA context)'
    )
    if result.cached_after_step_gib is not None:
        print(
            f'cached     {result.cached_after_step_gib:.2f} GiB after the step (freed blocks the allocator keeps until '
            'torch.cuda.empty_cache(): the weight sync and the rollout start with them where none runs between)'
        )
    if result.model_peak_gib is not None:
        diff = result.model_peak_gib / result.traced_peak_gib - 1 if result.traced_peak_gib else 0.0
        print(f"analytic   {result.model_peak_gib:.2f} GiB (the memory model's trainer terms; {diff:+.1%})")
    for n in result.notes:
        print(f'note       {n}')
    print(
        f"({result.seconds:.1f} s; allocated bytes: the CUDA context, NCCL and the allocator's reserve are not in it)"
    )
    return 0
