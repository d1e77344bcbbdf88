"""Console rendering of a check report (rich), kept apart from the logic."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..check import CheckReport

STYLE = {'error': 'bold red', 'warning': 'yellow', 'info': 'cyan'}


def _ids(ids) -> str:
    return ','.join(str(i) for i in ids) if ids else '-'


def plan_table(report: CheckReport) -> Table:
    p, cfg, hw = report.plan, report.cfg, report.hardware
    t = Table(title='Launch plan', show_header=False, box=None, pad_edge=False, title_justify='left',
              title_style='bold')
    t.add_column(style='bold', no_wrap=True)
    t.add_column(overflow='fold')
    hw_text = f'{hw.gpus} GPU(s)' if hw.gpus is not None else 'unknown (pass --gpus N --gpu-type T)'
    if hw.gpu_type:
        hw_text += f' {hw.gpu_type}'
    t.add_row('hardware', escape(f'{hw_text} [{hw.source}]'))
    t.add_row('model', f'{cfg.model} ({cfg.tuner_type}{", " + cfg.quant_method if cfg.quant_method else ""})')
    nproc = p.nproc_per_node if p.nproc_per_node is not None else '1 (NPROC_PER_NODE unset)'
    t.add_row('processes', f'{p.nnodes} node(s) × {nproc} = world {p.world_size}')
    gpu_map = ' '.join(f'r{pr["rank"]}→{pr["gpu"] if pr["gpu"] is not None else "?"}' for pr in p.processes[:16])
    t.add_row('training GPUs', f'{_ids(p.visible_gpus)}   {gpu_map}')
    if cfg.use_vllm:
        mode = cfg.vllm_mode or '(unset)'
        eng = f'{p.vllm_engines} engine(s)' if p.vllm_engines else ''
        t.add_row('vLLM', f'{mode}, TP {cfg.vllm_tensor_parallel_size}, {eng}, util {cfg.vllm_gpu_memory_utilization}, '
                  f'max_model_len {cfg.vllm_max_model_len or "model default"}, sleep {cfg.effective_sleep_level}')
        if cfg.vllm_mode == 'server':
            t.add_row('rollout GPUs', _ids(p.rollout_gpus) if p.rollout_gpus is not None else 'unknown')
    else:
        t.add_row('vLLM', 'off (HF generate)')
    G = cfg.num_generations
    t.add_row('micro-batch', f'{cfg.per_device_train_batch_size} completions/process → {p.global_micro_batch} in all')
    ppo = f'{p.prompts_per_optimizer_step:.3g}' if p.prompts_per_optimizer_step is not None else '?'
    t.add_row('optimizer step', f'{p.optimizer_batch} completions = {ppo} prompts × {G} '
              f'(GA {cfg.gradient_accumulation_steps})')
    ppr = f'{p.prompts_per_rollout:.3g}' if p.prompts_per_rollout is not None else '?'
    t.add_row('rollout', f'{p.generation_batch} completions = {ppr} prompts '
              f'(steps_per_generation {p.steps_per_generation})')
    t.add_row('lengths', f'prompt ≤ {cfg.max_length or "model max"}, completion ≤ {cfg.max_completion_length}')
    return t


def print_report(report: CheckReport, console: Console | None = None) -> None:
    out = console or Console(highlight=False)
    out.print(f'[bold]config[/] {report.launch.config_file}')
    for note in report.launch.notes:
        out.print('[yellow]note[/] ' + escape(note))
    out.print(plan_table(report))
    c = report.counts()
    out.print()
    out.print(f'[bold]Findings[/]: {c["error"]} error(s), {c["warning"]} warning(s), {c["info"]} info')
    if report.findings:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(overflow='fold')
        for f in report.findings:
            body = f'[dim]{f.rule}[/] ({escape(", ".join(f.arguments))})\n{escape(f.message)}'
            if f.fix:
                body += '\n[green]fix:[/] ' + escape(f.fix)
            if f.source:
                body += '\n[dim]source: ' + escape(f.source) + '[/]'
            grid.add_row(f'[{STYLE[f.severity]}]{f.severity.upper()}[/]', body)
        out.print(grid)
    verdict = '[bold green]OK[/]: no errors' if report.ok else '[bold red]REFUSED[/]: fix the errors above'
    out.print(verdict)
