"""The plan table of a rollout server checked on its own (``grpo-guard check -- swift rollout ...`` or
``-- trl vllm-serve ...``): the server's GPUs, engines and vLLM settings, and nothing about a trainer (no tuner,
no world size, no batch: a server has none)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table


def rollout_plan_table(report) -> Table:
    from ..rules.rollout_port import server_port

    r, hw = report.launch.rollout, report.hardware
    t = Table(
        title='Rollout server plan',
        show_header=False,
        box=None,
        pad_edge=False,
        title_justify='left',
        title_style='bold',
    )
    t.add_column(style='bold', no_wrap=True)
    t.add_column(overflow='fold')
    hw_text = f'{hw.gpus} GPU(s)' if hw.gpus is not None else 'unknown (pass --gpus N --gpu-type T)'
    if hw.gpu_type:
        hw_text += f' {hw.gpu_type}'
    t.add_row('hardware', escape(f'{hw_text} [{hw.source}]'))
    srv = r.fw.server
    t.add_row('server', escape(f'{srv} ({r.source}), port {server_port(r) or "?"}'))
    t.add_row('model', escape(str(r.model)))
    gpus = ','.join(map(str, r.gpus)) if r.gpus is not None else 'all visible (CUDA_VISIBLE_DEVICES unset)'
    t.add_row(
        'rollout GPUs', f'{gpus}; needs TP {r.tensor_parallel_size} × DP {r.data_parallel_size} = {r.gpus_needed}'
    )
    t.add_row(
        'vLLM',
        f'util {r.gpu_memory_utilization}, max_model_len {r.max_model_len or "model default"}, '
        f'max_num_seqs {r.max_num_seqs or "vLLM default"}' + (', eager' if r.enforce_eager else ''),
    )
    return t
