"""Check a rollout server on its own (``grpo-guard check -- swift rollout ...`` or ``-- trl vllm-serve ...``):
its arguments, its GPUs (TP x DP of them, all existing) and vLLM's start-up on each of them.
Imports neither torch nor the frameworks."""
from __future__ import annotations

from .config import GRPOConfig
from .hardware import Hardware
from .launch import Launch
from .plan import build_plan
from .rules import ERROR, WARNING, Finding, _model_max_len


def rollout_config(launch: Launch) -> GRPOConfig:
    r = launch.rollout
    return GRPOConfig(model=r.model, rlhf_type='grpo', use_vllm=True, vllm_mode='server',
                      vllm_tensor_parallel_size=r.tensor_parallel_size, vllm_data_parallel_size=r.data_parallel_size,
                      vllm_max_model_len=r.max_model_len, vllm_gpu_memory_utilization=r.gpu_memory_utilization,
                      vllm_max_num_seqs=r.max_num_seqs, vllm_enforce_eager=r.enforce_eager,
                      vllm_engine_kwargs=r.engine_kwargs, vllm_server_host=['127.0.0.1'],
                      num_generations=2, reward_funcs=['accuracy'])


def rollout_findings(r, hw: Hardware, model: dict | None, as_error: bool) -> list[Finding]:
    """The server's own start-up checks. ``as_error``: the server is what is being launched (an unknown
    argument stops it); beside a trainer it is a warning, as the server runs in another terminal."""
    out: list[Finding] = []
    srv = 'swift rollout' if r.framework == 'swift' else 'trl vllm-serve'
    for u in r.unknown:
        out.append(Finding(ERROR if as_error else WARNING, 'rollout.unknown-argument', ['rollout'],
                           f'{srv} ({r.source}): {u}; as written the server stops at start-up'
                           + (f' (planned with the intended value {r.intended})' if r.intended and not as_error
                              else ''), 'use the current name shown', 'swift/pipelines/base.py (remaining_argv)'
                           if r.framework == 'swift' else 'trl/scripts/vllm_serve.py (TrlParser)'))
    gpus = r.gpus
    have = len(gpus) if gpus is not None else hw.gpus
    need = r.gpus_needed
    tp, dp = r.flag('tensor_parallel_size'), r.flag('data_parallel_size')
    if have is not None and have < need:
        msg = (f'Error: local_device_count ({have}) must be greater than or equal to the product of '
               f'vllm_data_parallel_size ({r.data_parallel_size}) and vllm_tensor_parallel_size '
               f'({r.tensor_parallel_size}) ({need})' if r.framework == 'swift' else
               f'{tp} {r.tensor_parallel_size} x {dp} {r.data_parallel_size} needs {need} GPUs but {have} are visible')
        out.append(Finding(ERROR, 'rollout.gpu-count', [tp.lstrip('-'), dp.lstrip('-'), 'CUDA_VISIBLE_DEVICES'],
                           f'{srv} ({r.source}): {msg}',
                           f'CUDA_VISIBLE_DEVICES with {need} GPU ids, or {dp} {max(1, have // r.tensor_parallel_size)}',
                           'swift/arguments/deploy_args.py::RolloutArguments' if r.framework == 'swift' else None))
    if gpus is not None and hw.gpus is not None:
        missing = [i for i in gpus if i >= hw.gpus]
        if missing:
            out.append(Finding(ERROR, 'rollout.gpu-missing', ['CUDA_VISIBLE_DEVICES'],
                               f'{srv} ({r.source}): GPU(s) {",".join(map(str, missing))} do not exist: this node has '
                               f'{hw.gpus} GPU(s) (ids 0..{hw.gpus - 1})', 'CUDA_VISIBLE_DEVICES on existing ids'))
    heads = (model or {}).get('num_attention_heads')
    if isinstance(heads, int) and heads % max(1, r.tensor_parallel_size):
        out.append(Finding(ERROR, 'rollout.tp-heads', [tp.lstrip('-')],
                           f'Total number of attention heads ({heads}) must be divisible by tensor parallel size '
                           f'({r.tensor_parallel_size}). [vLLM, at engine start]',
                           f'{tp} one of {[t for t in (1, 2, 4, 8) if heads % t == 0]}', 'vllm/config/model.py'))
    mmax = _model_max_len(model)
    if r.max_model_len and mmax and r.max_model_len > mmax:
        out.append(Finding(ERROR, 'rollout.max-model-len', [r.flag('max_model_len').lstrip('-')],
                           f'User-specified max_model_len ({r.max_model_len}) is greater than the derived max_model_len '
                           f'({mmax}) [vLLM, at engine start]', f'{r.flag("max_model_len")} {mmax}',
                           'vllm/config/model.py'))
    return out


def check_rollout(launch: Launch, hw: Hardware, packages: dict | None = None, model_config: dict | None = None):
    from .check import CheckReport, installed_packages, model_config_for, with_rollout_gpus
    from .memplan import memory_inputs
    from .memory import estimate
    r = launch.rollout
    cfg = rollout_config(launch)
    hw = with_rollout_gpus(hw, r)
    plan = build_plan(cfg, {}, hw)
    plan.visible_gpus, plan.visible_count, plan.processes = [], 0, []
    from .model_source import config_source
    given_config = model_config is not None
    model_config, unchecked = model_config_for(r.model, model_config)
    report = CheckReport(launch=launch, cfg=cfg, plan=plan, hardware=hw,
                         findings=rollout_findings(r, hw, model_config, as_error=True),
                         packages=installed_packages() if packages is None else packages, memory_unchecked=unchecked)
    report.assumptions += [config_source(r.model, given_config)] if model_config is not None else []
    if unchecked is None:
        inp = memory_inputs(report, model_config)
        if inp is not None:
            inp.prompt_len = 0
            report.memory = [m for m in estimate(cfg, plan, inp) if m.role == 'rollout']
            for m in report.memory[:1]:
                for p in m.problems:
                    if p.get('severity', 'error') == 'error':
                        report.findings.append(Finding(ERROR, p['check'], [r.flag('gpu_memory_utilization').lstrip('-')],
                                                       f'GPU {m.gpu} (rollout): {p["message"]}', None))
    report.findings.sort(key=lambda f: {'error': 0, 'warning': 1, 'info': 2}[f.severity])
    return report
