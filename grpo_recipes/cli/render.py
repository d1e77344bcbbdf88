"""Console rendering of a check report (rich), kept apart from the logic."""

from __future__ import annotations

import os
import shutil
import sys

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..check import CheckReport
from .bars import print_bars
from .gpu_ids import id_ranges
from .verdict import verdict

STYLE = {'error': 'bold red', 'warning': 'yellow', 'info': 'cyan'}


def _ids(ids) -> str:
    return ','.join(str(i) for i in ids) if ids else '-'


def plan_table(report: CheckReport) -> Table:
    if report.launch.kind == 'rollout':  # a server on its own: no trainer lines
        from .render_rollout import rollout_plan_table

        return rollout_plan_table(report)
    p, cfg, hw = report.plan, report.cfg, report.hardware
    t = Table(
        title='Launch plan', show_header=False, box=None, pad_edge=False, title_justify='left', title_style='bold'
    )
    t.add_column(style='bold', no_wrap=True)
    t.add_column(overflow='fold')
    hw_text = f'{hw.gpus} GPU(s)' if hw.gpus is not None else 'unknown (pass --gpus N --gpu-type T)'
    if hw.gpu_type or hw.gpu_mem_gib:
        card, cap = hw.capacity()  # the resolved catalogue card and its capacity
        hw_text += f' {card or hw.gpu_type}' + (
            f' ({cap:.2f} GiB{", --gpu-mem" if hw.gpu_mem_gib else ""})' if cap else ' (capacity unknown)'
        )
    t.add_row('hardware', escape(f'{hw_text} [{hw.source}]'))
    t.add_row('model', f'{cfg.model} ({cfg.tuner_type}{", " + cfg.quant_method if cfg.quant_method else ""})')
    nproc = p.nproc_per_node if p.nproc_per_node is not None else '1 (NPROC_PER_NODE unset)'
    t.add_row('processes', f'{p.nnodes} node(s) × {nproc} = world {p.world_size}')
    gpu_map = ' '.join(f'r{pr["rank"]}→{pr["gpu"] if pr["gpu"] is not None else "?"}' for pr in p.processes[:16])
    t.add_row('training GPUs', f'{_ids(p.visible_gpus)}   {gpu_map}')
    if cfg.use_vllm:
        mode = cfg.vllm_mode or '(unset)'
        eng = f'{p.vllm_engines} engine(s)' if p.vllm_engines else ''
        t.add_row(
            'vLLM',
            f'{mode}, TP {cfg.vllm_tensor_parallel_size}, {eng}, util {cfg.vllm_gpu_memory_utilization}, '
            f'max_model_len {cfg.vllm_max_model_len or "model default"}, sleep {cfg.effective_sleep_level}',
        )
        if cfg.vllm_mode == 'server':
            t.add_row(
                'rollout GPUs',
                (_ids(p.rollout_gpus) if p.rollout_gpus is not None else 'unknown')
                + (' on another machine' if p.rollout_remote else ''),
            )
    else:
        t.add_row('vLLM', 'off (HF generate)')
    G = cfg.num_generations
    t.add_row('micro-batch', f'{cfg.per_device_train_batch_size} completions/process → {p.global_micro_batch} in all')
    ppo = f'{p.prompts_per_optimizer_step:.3g}' if p.prompts_per_optimizer_step is not None else '?'
    t.add_row(
        'optimizer step',
        f'{p.optimizer_batch} completions = {ppo} prompts × {G} (GA {cfg.gradient_accumulation_steps})',
    )
    ppr = f'{p.prompts_per_rollout:.3g}' if p.prompts_per_rollout is not None else '?'
    t.add_row(
        'rollout', f'{p.generation_batch} completions = {ppr} prompts (steps_per_generation {p.steps_per_generation})'
    )
    t.add_row('lengths', f'prompt ≤ {cfg.max_length or "model max"}, completion ≤ {cfg.max_completion_length}')
    return t


def _col(m, *keys) -> float:
    return sum(m.phase_terms.get(k, 0.0) for k in keys)


# The one basis every memory figure of check is on (memory.reserve.quantities' device figure): what nvidia-smi shows
# and what an OOM is measured against.
MEMORY_BASIS = 'the device: torch reserved + CUDA context'
# The verdict column of a GPU (memory.inputs.GPUMemory.verdict; '' : fits or OOM by its peak).
VERDICT_STYLE = {'OOM if long': '[yellow]OOM if long[/]', 'withheld': '[bright_black]withheld[/]'}


def memory_table(report: CheckReport) -> Table:
    """One row per group of identical GPUs; the terms of each GPU's peak phase (GiB)."""
    caps = sorted({m.capacity_gib for m in report.memory})
    t = Table(
        title=f'Predicted memory per GPU (GiB of {"/".join(f"{c:.1f}" for c in caps)}, terms of the peak '
        f'phase; {MEMORY_BASIS})',
        title_justify='left',
        title_style='bold',
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
    )
    for col in ('GPU', 'role', 'model', 'optim', 'act', 'vLLM', 'other', 'peak', 'use', 'phase', 'verdict'):
        t.add_column(
            col,
            justify='left' if col in ('GPU', 'role', 'phase', 'verdict') else 'right',
            no_wrap=True,
            min_width=4 if col == 'verdict' else None,
        )
    groups: dict = {}
    for m in report.memory:
        key = (m.role, tuple(sorted(m.phase_terms.items())), m.phase)
        groups.setdefault(key, []).append(m)
    for ms in groups.values():
        m = ms[0]
        ids = id_ranges([x.gpu for x in ms])
        model = _col(
            m,
            'weights',
            'ref_model',
            'lora_params',
            'zero3_live_params',
            'zero3_sync_gather',
            'zero3_generation_gather',
        )
        optim = _col(m, 'grads+optimizer')
        # activations and the other transients of the step (its net: the largest of them at the peak)
        act = _col(
            m, 'activations', 'logits', 'overlap', 'hf_generate_kv', 'adamw_foreach_temp', 'tied_embedding_grad_temp'
        )
        vllm = sum(v for k, v in m.phase_terms.items() if k.startswith('vllm_'))
        other = m.total_gib - model - optim - act - vllm
        verdict = VERDICT_STYLE.get(m.verdict) or ('[green]fits[/]' if m.fits else '[bold red]OOM[/]')
        pct = f'{m.peak_fraction:.0%}'
        t.add_row(
            ids,
            m.role,
            f'{model:.1f}',
            f'{optim:.1f}',
            f'{act:.1f}',
            f'{vllm:.1f}',
            f'{other:.1f}',
            f'{m.total_gib:.1f}',
            pct,
            m.phase,
            verdict,
        )
    return t


def make_console() -> Console:
    """COLUMNS when set (also when piped), else the terminal's width, else 100 columns when piped."""
    raw = os.environ.get('COLUMNS', '')
    if raw.isdigit() and int(raw) > 0:
        width = int(raw)
    else:
        width = shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100
    return Console(highlight=False, width=max(40, width))


def print_report(report: CheckReport, console: Console | None = None, allow_unchecked: bool = False) -> None:
    out = console or make_console()
    out.print(f'[bold]config[/] {report.launch.config_file or getattr(report.launch, "source", None)}')
    for note in report.launch.notes:
        out.print('[yellow]note[/] ' + escape(note))
    own = getattr(report, 'summary_lines', None)  # a front end's own plan (frontends/megatron/checked.py)
    if own is not None:
        for line in own():
            out.print(escape(line))
    else:
        _plan_memory_speed(report, out)
    c = report.counts()
    out.print()
    out.print(f'[bold]Findings[/]: {c["error"]} error(s), {c["warning"]} warning(s), {c["info"]} info')
    if report.findings:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(overflow='fold')
        for f in report.findings:
            body = f'[dim]{f.rule}[/] ({escape(", ".join(f.arguments))})\n{escape(f.message)}'
            if f.fix and '\n' in f.fix:  # lines to paste: printed below the findings, at column 0
                body += '\n[green]fix:[/] ' + escape(f.fix.splitlines()[0]) + ' (the lines below the findings)'
            elif f.fix:
                body += '\n[green]fix:[/] ' + escape(f.fix)
            if f.source:
                body += '\n[dim]source: ' + escape(f.source) + '[/]'
            grid.add_row(f'[{STYLE[f.severity]}]{f.severity.upper()}[/]', body)
        out.print(grid)
        for f in report.findings:
            if f.fix and '\n' in f.fix:  # as the user pastes them: no table indentation, no wrapping
                first, *rest = f.fix.splitlines()
                out.print(f'[green]fix[/] ({f.rule}): ' + escape(first))
                for line in rest:
                    out.print(escape(line), soft_wrap=True)
    if report.fix_verified is not None:
        fv = report.fix_verified
        ok = fv.get('ok')
        if 'replanned' in fv:  # an environment line (envfix.verify): the launch re-planned with it
            rp = fv['replanned']
            peak = f'peak {rp["peak_fraction"]:.0%} of the GPU' if rp.get('peak_fraction') is not None else 'no plan'
            parser = f"; ms-swift's parser: {fv.get('message') or 'ok'}" if 'parser' in fv else ''
            out.print(
                ('[green]fix verified[/]: ' if ok else '[red]fix rejected[/]: ')
                + escape(
                    're-planned with '
                    + ' '.join(f'{k}={v}' for k, v in fv['env'].items())
                    + f': {peak}'
                    + ('' if rp['fits'] else ', still does not fit')
                    + parser
                )
            )
        else:
            out.print(
                ('[green]fix verified[/]: ' if ok else '[red]fix rejected[/]: ')
                + escape(
                    'the proposed fix '
                    + ('passes' if ok else 'fails')
                    + ' '
                    + (fv.get('parser') or 'the real parser')
                    + ('' if ok else f' ({fv.get("error_type")}: {fv.get("message")})')
                    + (f'; not seen by that parser: {", ".join(fv["not_parsed"])}' if fv.get('not_parsed') else '')
                )
            )
    if report.assumptions:
        out.print('[bold]Assumed[/]:')
        for a in report.assumptions:
            out.print(escape(f'  - {a}'))
    out.print(verdict_line(report, allow_unchecked))


def _plan_memory_speed(report: CheckReport, out: Console) -> None:
    """The plan table, the memory table with vLLM's budget line, and the predicted speed."""
    out.print(plan_table(report))
    if report.memory:
        out.print()
        out.print(memory_table(report))
        kv = next((m.vllm for m in report.memory if m.vllm), None)
        if kv:
            line = (
                f'vLLM per engine: {kv["requested_gib"]} GiB reserved = weights {kv["weights_gib"]} + profiling '
                f'peak {kv["activation_gib"]} ({kv.get("sampler", "native")} sampler) + non-torch '
                f'{kv.get("non_torch_gib", 0)} + '
                + (f'CUDA graphs {kv["cuda_graphs_in_budget_gib"]} + ' if kv.get('cuda_graphs_in_budget_gib') else '')
                + f'KV {kv["kv_cache_gib"]} ({kv["kv_tokens"]:,} tokens)'
            )
            if 'rollout_tokens' in kv and report.launch.kind != 'rollout':  # a server alone has no trainer batch
                line += f'; a rollout needs {kv["rollout_tokens"]:,} tokens'
            out.print(escape(line))

        print_bars(report, out)
    from ..speed.report import speed_lines  # predicted seconds per step, phases, --fastest's ranking

    for i, line in enumerate(speed_lines(report)):
        out.print(('\n' if i == 0 else '') + escape(line))


def verdict_line(report: CheckReport, allow_unchecked: bool = False) -> str:
    """The console's last line for the verdict ``verdict.verdict`` decides."""
    decided = verdict(report)
    if report.stop:
        return f'[bold red]REFUSED[/]: it cannot start on this machine as written (below); {escape(report.unchecked)}'
    if decided == 'REFUSED':
        return '[bold red]REFUSED[/]: fix the errors above'
    warn = report.counts()['warning']
    tail = f' ({warn} warning(s) above)' if warn else ''
    if decided == 'UNCHECKED':
        how = 'accepted with --allow-unchecked' if allow_unchecked else 'pass --allow-unchecked to accept'
        return f'[bold yellow]UNCHECKED[/]: rules OK; {escape(report.unchecked)} ({how}){tail}'
    return f'[bold green]OK[/]: no errors{tail}'


def print_calibration(result: dict, console: Console | None = None) -> None:
    out = console or make_console()
    t = Table(
        title='Memory model vs published measurements (predicted/observed, error)',
        title_justify='left',
        title_style='bold',
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
    )
    for col in ('case', 'fit', 'peak GiB', 'vLLM weights GiB', 'vLLM KV GiB'):
        # values are never cut: the case id wraps (folds) to leave them room
        t.add_column(col, no_wrap=col != 'case', overflow='fold')
    for row in result['per_case']:
        if 'cannot_predict' in row:
            continue
        fit = row.get('fit')
        fit_s = (('[green]' if fit['right'] else '[red]') + f'{fit["predicted"]}/{fit["observed"]}[/]') if fit else '-'
        pk = row.get('peak')
        pk_s = f'{pk["predicted"]:.1f}/{pk["observed"]:.1f} {pk["predicted"] / pk["observed"] - 1:+.0%}' if pk else '-'
        if pk and 'range' in pk:
            pk_s = f'{pk["range"][0]:.0f}-{pk["range"][1]:.0f}/{pk["observed"]:.0f} {pk["range_error"]:.0%}'
        elif pk and 'bound' in pk:
            pk_s = f'<={pk["predicted"]:.1f}/{pk["observed"]:.1f} ' + ('held' if pk['bound_held'] else 'BROKEN')
        elif pk and 'floor' in pk:
            pk_s = f'{pk["predicted"]:.1f}/>={pk["observed"]:.1f} ' + ('held' if pk['bound_held'] else 'BROKEN')
        w = row.get('vllm_weights')
        w_s = f'{w["predicted"]:.1f}/{w["observed"]:.1f} {w["rel_error"]:.0%}' if w else '-'
        kv = row.get('vllm_kv')
        kv_s = f'{kv["predicted"]:.1f}/{kv["observed"]:.1f} {kv["rel_error"]:.0%}' if kv else '-'
        t.add_row(row['id'], fit_s, pk_s, w_s, kv_s)
    out.print(t)
    vllm_rows = [r for r in result['per_case'] if 'vllm_kv' in r]
    if vllm_rows:
        samplers = sorted({r['predicted'].get('sampler', '?') for r in vllm_rows})
        out.print(
            "[dim]vLLM KV observed: the engine's token capacity where the case states it, else the logged "
            f'GiB; profiling sampler assumed: {", ".join(samplers)} (set VLLM_USE_FLASHINFER_SAMPLER in a '
            "case's config to state it)[/]"
        )
    for row in result['per_case']:
        if 'cannot_predict' in row:
            out.print(f'[dim]cannot predict {row["id"]}: missing {escape(row["cannot_predict"])}[/]')

    def pct(x):
        return '-' if x is None else f'{x:.1%}'

    if result.get('replayed') is not None:
        out.print(
            f"--replay: torch's reserve replayed from the traced step on {result['replayed']} case(s); the closed form "
            'on the others (not GRPO training, sharded or not buildable)'
        )
    out.print(f'fit/OOM right: {pct(result["fit_accuracy"])} of {result["fit_cases"]} cases that state an outcome')
    out.print(
        f'peak: median |relative error| {pct(result["peak_median_rel_error"])} over {result["peak_cases"]} cases'
        f' (current stacks {pct(result["peak_median_rel_error_current"])} over {result["peak_cases_current"]}; '
        f'2023-era tables {pct(result["peak_median_rel_error_legacy"])} over {result["peak_cases_legacy"]})'
    )
    out.print(
        f'  {result["peak_cases_ranged"]} case(s) state no torch/transformers version, so the AdamW step is '
        f"either; they are scored against that range (as points at today's defaults, current stacks: "
        f'{pct(result["peak_median_rel_error_current_point"])}); bounds held: {result["peak_bounds_held"]} of '
        f'{result["peak_bounds"]} (packed rows with no sample lengths: the prediction bounds the peak; a logits '
        'window longer than every one before it: the measured peak bounds the prediction)'
    )
    if result.get('device_cases'):
        devs = ', '.join(
            f'{r["id"]} {r["device"]["predicted"]:.1f}/{r["device"]["observed"]:.1f} '
            + (
                f'{r["device"]["signed_error"]:+.1%}'
                if 'device_floor_held' not in r
                else ('bound held' if r['device_floor_held'] else 'bound BROKEN')
            )
            for r in result['per_case']
            if 'device' in r
        )
        out.print(
            f'device (nvidia-smi used): median |relative error| {pct(result["device_median_rel_error"])} over '
            f'{result["device_cases"]} cases: {devs}'
        )
    out.print(
        f'vLLM weights: max error {pct(result["vllm_weights_max_rel_error"])} over '
        f'{result["vllm_weights_cases"]} cases; KV cache: max {pct(result["vllm_kv_max_rel_error"])}, '
        f'median {pct(result["vllm_kv_median_rel_error"])} over {result["vllm_kv_cases"]} cases'
    )
    out.print(
        f'vLLM start-up failures predicted: {result["startup_failures_predicted"]} of '
        f'{result["startup_failures"]}; cannot predict: {len(result["cannot_predict"])} of {result["cases"]}'
    )
