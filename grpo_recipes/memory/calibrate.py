"""Score the memory model against published measurements (``grpo-guard calibrate CASES.jsonl``).

Schema: ../shared/calibration/README.md. For each case we predict what the source observed:
- ``vllm_startup``: vLLM weights and KV cache per GPU, and whether start-up fails;
- ``grpo_train`` / ``sft_train``: the per-GPU peak and fit/OOM.
Missing inputs make a case "cannot predict" with the field named; nothing is guessed. Settings a
source leaves out take the framework defaults (ms-swift's for ms-swift cases, which is what its
users ran). Peaks are compared like with like: ms-swift's logged ``memory(GiB)`` is torch's reserved
memory, so the CUDA context and NCCL buffers are left out of that comparison; nvidia-smi and header
comments are compared with the full total. Nothing here is fitted per case.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

from ..config import GRPOConfig
from ..errors import GuardError
from ..frontends.trl import arguments as trl_arguments
from ..frontends.trl.reader import load_trl, to_config
from ..gpus import candidates
from ..hardware import Hardware
from ..plan import build_plan
from ..swift_args import snapshot
from ..versions import version_tuple
from . import vllm_startup
from .arch import Arch, model_max_len
from .cases import ARCH_COUNTS, ARCH_POSITIVE, CannotPredict, _check_shape
from .estimate import estimate
from .inputs import CUDA_CONTEXT, GiB, Inputs
from .trainer import logits_from, resolve_adamw
from .vllm import resolve_sampler, vllm_checks, vllm_kv_bytes_per_token, vllm_terms
from .vllm_engine import (
    default_gpu_memory_utilization,
    max_len_refusal,
    quantization_refusal,
    tp_heads_refusal,
    vllm_dtype,
)

RENAMES = {'train_type': 'tuner_type', 'max_prompt_length': 'max_length'}
# vLLM's own argument names, as a vllm_startup case may keep them, and the ms-swift names they map to
VLLM_RENAMES = {
    'gpu_memory_utilization': 'vllm_gpu_memory_utilization',
    'tensor_parallel_size': 'vllm_tensor_parallel_size',
    'max_model_len': 'vllm_max_model_len',
    'max_num_seqs': 'vllm_max_num_seqs',
    'enforce_eager': 'vllm_enforce_eager',
    'data_parallel_size': 'vllm_data_parallel_size',
    'enable_expert_parallel': 'vllm_enable_expert_parallel',
}
# vLLM engine arguments ms-swift has no flag for; they travel in vllm_engine_kwargs (with or without vllm_)
ENGINE_KEYS = (
    'max_num_batched_tokens',
    'kv_cache_dtype',
    'quantization',
    'limit_mm_per_prompt',
    'enable_chunked_prefill',
    'mm_processor_kwargs',
    'block_size',
    'num_gpu_blocks_override',
)
FRAMEWORKS_MAPPED = ('ms-swift', 'trl', 'vllm', 'unsloth')


def _gpu(case: dict) -> str | None:
    v = case.get('gpu')
    return None if v is None else str(v)


def _arch(case: dict) -> Arch:
    mc = case.get('model_config')
    if not mc:
        raise CannotPredict('model_config')
    mc = dict(mc)
    for key in ARCH_POSITIVE + ARCH_COUNTS:
        v = mc.get(key)
        low = 1 if key in ARCH_POSITIVE else 0
        if v is not None and not (isinstance(v, int) and not isinstance(v, bool) and v >= low):
            raise CannotPredict(f'model_config.{key} (an integer >= {low}, got {v!r:.40})')
    if str(mc.get('model_type', '')).lower() == 'qwen' and isinstance(mc.get('intermediate_size'), int):
        mc['intermediate_size'] = mc['intermediate_size'] // 2  # Qwen v1 states twice the SwiGLU width
    try:
        return Arch.from_config(mc)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        raise CannotPredict(f'model_config ({type(e).__name__}: {e})') from None


def _config(case: dict, extra: dict | None = None, renames: dict | None = None) -> tuple[GRPOConfig, dict]:
    known = {a['dest'] for a in snapshot()['arguments']}
    argv: list[str] = []
    env: dict[str, str] = {}
    values = dict(case.get('config') or {})
    values.update(extra or {})
    renames = {**RENAMES, **(renames or {})}
    for k, v in values.items():
        k = renames.get(k, k)
        if k in ('NPROC_PER_NODE', 'CUDA_VISIBLE_DEVICES', 'NNODES'):
            env[k] = str(v)
            continue
        if isinstance(v, dict) and k in ('vllm_limit_mm_per_prompt', 'vllm_engine_kwargs'):
            v = json.dumps(v)  # ms-swift takes these JSON objects as text
        if k not in known or v is None or isinstance(v, dict):
            continue
        if k in ('quant_method', 'quant_bits') and values.get('quant_method') != 'bnb':
            continue  # GPTQ/AWQ checkpoints: the quantisation is in model_config, not an ms-swift argument
        argv.append(f'--{k}')
        argv += [str(x) for x in v] if isinstance(v, list) else [str(v)]
    try:
        cfg, _ = GRPOConfig.from_argv(argv)
    except Exception as e:  # noqa: BLE001 - a case whose stated values ms-swift would not parse
        raise CannotPredict(f'config ({e})') from None
    return cfg, env


def is_legacy(case: dict) -> bool:
    """A 2023-era table (ms-swift 1.x/2.x benchmarks, LLaMA-Factory's wiki): its allocator, kernels and
    defaults differ from the stack the guard plans for, so its peak errors are reported apart."""
    fw = str(case.get('framework', '')).lower()
    ver = str(case.get('framework_version', '')).lower()
    return 'llama-factory' in fw or 'llamafactory' in fw or bool(re.search(r'(^|[^\d.])[12]\.(x|\d)', ver))


def _is_trl(case: dict) -> bool:
    return str(case.get('framework', '')).lower().startswith('trl')


# Case keys (ms-swift names, per the schema) -> TRL's flags; the rest are taken as TRL's own names.
TRL_CASE_FLAGS = {
    'lora_rank': 'lora_r',
    'target_modules': 'lora_target_modules',
    'torch_dtype': 'dtype',
    'vllm_max_model_len': 'vllm_max_model_length',
}


def _trl_config(case: dict) -> tuple[GRPOConfig, dict]:
    """A TRL case read by the TRL front end, as `accelerate launch train.py ...` with the stated settings:
    what the source leaves out takes the TRL defaults (of ``framework_version`` where it predates the
    snapshot's TRL and changes them, else of the snapshot's TRL, which the row says)."""
    c = dict(case.get('config') or {})
    known = {f['name'] for cls in ('GRPOConfig', 'ModelConfig') for f in trl_arguments.snapshot()[cls]}
    n = str(c.pop('NPROC_PER_NODE', case.get('num_gpus') or 1))
    acc = ['accelerate', 'launch', '--num_processes', n]
    ds = str(c.pop('deepspeed', '') or '')
    if ds.startswith('zero'):
        acc += ['--use_deepspeed', '--zero_stage', ds[4]]
        if 'offload' in ds:
            acc += ['--offload_optimizer_device', 'cpu'] + (['--offload_param_device', 'cpu'] if ds[4] == '3' else [])
    args: list[str] = []
    tuner = str(c.pop('tuner_type', c.pop('train_type', 'full')) or 'full')
    if tuner in ('lora', 'qlora'):
        args += ['--use_peft', 'true'] + (['--load_in_4bit', 'true'] if tuner == 'qlora' else [])
    if c.get('sleep_level'):
        args += ['--vllm_enable_sleep_mode', 'true']
    for k, v in c.items():
        k = TRL_CASE_FLAGS.get(k, k)
        if k not in known or v is None or isinstance(v, dict):
            continue
        args += [f'--{k}'] + (
            [str(x) for x in v] if isinstance(v, list) else [str(v).lower() if isinstance(v, bool) else str(v)]
        )
    env = {'CUDA_VISIBLE_DEVICES': ','.join(str(i) for i in range(int(n) if n.isdigit() else 1))}
    try:
        launch = load_trl([*acc, 'train.py', *args], env, case['id'])
        cfg, _ = to_config(launch, case.get('framework_version'))
        if c.get('max_prompt_length') is not None:  # the source's TRL truncated prompts there
            cfg = replace(cfg, max_length=int(c['max_prompt_length']))
    except (TypeError, ValueError, GuardError) as e:
        raise CannotPredict(f'config ({e})') from None
    return cfg, dict(launch.env)


def _window_longer_than_before(windows: list[dict]) -> int | None:
    """The first recorded logits window longer than every one before it (after the first), or None: the run's
    reserve then holds segments its first windows did not need."""
    for i in range(1, len(windows)):
        if windows[i]['logits_to_keep'] > max(w['logits_to_keep'] for w in windows[:i]):
            return windows[i]['logits_to_keep']
    return None


def predict(case: dict, replay: bool = False) -> dict:
    """The memory model's prediction for one case; ``replay``: torch's reserve of a GRPO training step from the traced
    step's replay (``check --replay``, ``memory.replay``) in place of the closed form."""
    _check_shape(case)
    kind = case['kind']
    fw = str(case.get('framework', '')).lower()
    if not any(fw.startswith(f) for f in FRAMEWORKS_MAPPED):
        raise CannotPredict(f'framework ({case.get("framework")}: its settings are not in ms-swift terms)')
    arch = _arch(case)
    cap = case.get('gpu_total_gib')
    if kind == 'vllm_startup':
        return _predict_vllm(case, arch, cap)
    if kind in ('grpo_train', 'sft_train'):
        return _predict_train(case, arch, cap, sft=(kind == 'sft_train'), replay=replay)
    raise CannotPredict(f'kind ({kind})')


def _predict_vllm(case: dict, arch: Arch, cap: float | None) -> dict:
    if cap is None:  # the card the case names, from the catalogue (every card a loose name could be)
        cards = candidates(_gpu(case))
        if not cards:
            return _vllm_weights_only(case, arch)
        outs = [_predict_vllm(case, arch, c) for _, c in cards]
        if len({o['fits'] for o in outs}) > 1:
            raise CannotPredict(f'gpu_total_gib (the verdict depends on which card: {cards})')
        out = dict(outs[0], capacity_candidates=', '.join(f'{n} {c} GiB' for n, c in cards))
        if len({o['kv_cache_gib'] for o in outs}) > 1:
            out.pop('kv_cache_gib')
        return out
    c = case.get('config') or {}
    extra = {'use_vllm': True, 'vllm_mode': 'colocate', 'rlhf_type': 'grpo'}
    engine = _engine_keys(c)
    if engine:
        extra['vllm_engine_kwargs'] = json.dumps(engine)
    # vLLM's --dtype (unstated: "auto") as vLLM resolves it on this card at this release; a refusal stops the engine
    mc = case.get('model_config') or {}
    dtype, dtype_refusal, _ = vllm_dtype(
        c.get('torch_dtype'), mc.get('torch_dtype', mc.get('dtype')), _gpu(case), case.get('framework_version')
    )
    # an unstated gpu_memory_utilization is vLLM's default at the case's release
    if c.get('vllm_gpu_memory_utilization', c.get('gpu_memory_utilization')) is None:
        extra['vllm_gpu_memory_utilization'] = default_gpu_memory_utilization(case.get('framework_version'))
    cfg, _ = _config({**case, 'config': {**c, 'torch_dtype': dtype}}, extra, renames=VLLM_RENAMES)
    arch = replace(arch, dtype=dtype)
    # the sampler: a stated VLLM_USE_FLASHINFER_SAMPLER decides; whether FlashInfer was installed is not
    # a field of the schema, so otherwise vLLM's native sampler (the larger reservation) is assumed
    sampler, why = resolve_sampler(
        c.get('VLLM_USE_FLASHINFER_SAMPLER'), case.get('framework_version'), None, _gpu(case)
    )
    logged = logged_sampler(case)
    if c.get('VLLM_USE_FLASHINFER_SAMPLER') is None and logged:
        sampler, why = logged
    graphs_env = c.get('VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS')
    inp = Inputs(
        arch=arch,
        capacity_gib=cap,
        gpu_name=_gpu(case),
        prompt_len=0,
        vllm_entry='server',
        vllm_sampler=sampler,
        vllm_sampler_why=why,
        vllm_version=case.get('framework_version'),
        vllm_graphs_env=None if graphs_env is None else str(graphs_env),
        vllm_use_v1_env=None if c.get('VLLM_USE_V1') is None else str(c['VLLM_USE_V1']),
    )
    v = vllm_terms(cfg, inp)
    problems: list[dict] = []
    plan = build_plan(cfg, {}, Hardware())
    plan.rollout_concurrency_per_engine = None
    problems += _engine_refusals(cfg, arch, mc, c, dtype_refusal)
    method = engine.get('quantization') or (mc.get('quantization_config') or {}).get('quant_method')
    quant_refusal = quantization_refusal(method, _gpu(case), case.get('framework_version'))
    if quant_refusal:
        problems.append({'check': 'vllm.quant-card', 'severity': 'error', 'message': quant_refusal})
    vllm_checks(cfg, plan, inp, v, cap * GiB - CUDA_CONTEXT, problems)
    failed = any(p.get('severity', 'error') == 'error' for p in problems)
    kv_per_token = vllm_kv_bytes_per_token(cfg, arch)
    if arch.linear_layers:  # a hybrid's logged token capacity spreads each request's linear state over max_model_len
        kv_per_token = vllm_startup.bytes_per_token(
            kv_per_token, arch, max(1, cfg.vllm_tensor_parallel_size), cfg.vllm_max_model_len or arch.context_len
        )
    return {
        'weights_gib': round(v['weights'] / GiB, 3),
        'kv_cache_gib': round(max(0.0, v['kv_cache']) / GiB, 3),
        'activation_gib': round(v['activation'] / GiB, 3),
        'sampler': sampler,
        'sampler_why': why,
        'kv_bytes_per_token': kv_per_token,
        'startup_failed': failed,
        'fits': not failed,
        'reasons': [p['check'] for p in problems],
    }


def _engine_refusals(cfg: GRPOConfig, arch: Arch, model: dict, c: dict, dtype_refusal: str | None) -> list[dict]:
    """What vLLM refuses before it measures any memory: the dtype on this card (``vllm_engine.vllm_dtype``), a TP
    size that does not divide the attention heads, and a max_model_len over the model's unless
    ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` is set (vllm/config/model.py ``verify_with_parallel_config`` and
    ``_get_and_verify_max_len``; the rules vllm.tp-heads and length.vllm-exceeds-model say the same of a launch)."""
    allow = str(c.get('VLLM_ALLOW_LONG_MAX_MODEL_LEN', '')).strip().lower() in ('1', 'true')
    refusals = (
        ('vllm.bf16-card', dtype_refusal),
        ('vllm.tp-heads', tp_heads_refusal(arch.heads, max(1, cfg.vllm_tensor_parallel_size))),
        ('length.vllm-exceeds-model', None if allow else max_len_refusal(cfg.vllm_max_model_len, model_max_len(model))),
    )
    return [{'check': check, 'severity': 'error', 'message': msg} for check, msg in refusals if msg]


# V1's sampler says at start which top-k/top-p implementation it took (vllm/v1/sample/ops/topk_topp_sampler.py
# TopKTopPSampler.__init__, 0.10.1.1): a case that quotes one of these lines states its profiling sampler.
SAMPLER_LOG_LINES = (
    ('Using FlashInfer for top-p & top-k sampling', 'flashinfer'),
    ('Falling back to the PyTorch-native implementation of top-p & top-k sampling', 'native'),
    ('Falling back to default sampling implementation', 'native'),
)


def logged_sampler(case: dict) -> tuple[str, str] | None:
    """(sampler, why) from vLLM's own log line in the case's quoted text (``quote``, ``log``, ``outcome.log``), else
    None."""
    out = case.get('outcome') if isinstance(case.get('outcome'), dict) else {}
    for text in (case.get('quote'), case.get('log'), out.get('log')):
        if isinstance(text, str):
            for line, sampler in SAMPLER_LOG_LINES:
                if line in text:
                    return sampler, f"the case's vLLM log: '{line}'"
    return None


def _engine_keys(c: dict) -> dict:
    """The engine arguments a case states (with or without vllm_); --load-format bitsandbytes means bitsandbytes."""
    engine = {k: c.get(k, c.get(f'vllm_{k}')) for k in ENGINE_KEYS}
    if engine.get('quantization') is None and str(c.get('load_format', '')).lower() == 'bitsandbytes':
        engine['quantization'] = 'bitsandbytes'
    return {k: v for k, v in engine.items() if v is not None}


def _vllm_weights_only(case: dict, arch: Arch) -> dict:
    """No known card: a stated "Model loading took" is still predicted (weights do not depend on the card)."""
    out, c = case.get('outcome') or {}, case.get('config') or {}
    if out.get('model_load_gib_per_gpu', out.get('model_load_gib')) is None:
        raise CannotPredict('gpu_total_gib')
    cfg, _ = _config(case, {'use_vllm': True, 'vllm_mode': 'colocate', 'rlhf_type': 'grpo'}, renames=VLLM_RENAMES)
    arch = replace(arch, dtype=str(c['torch_dtype'])) if c.get('torch_dtype') else arch
    w = vllm_startup.per_rank_weight_bytes(cfg, arch, _engine_keys(c))
    return {'weights_gib': round(w / GiB, 3), 'card': 'not known: weights only'}


def _predict_train(case: dict, arch: Arch, cap: float | None, sft: bool, replay: bool = False) -> dict:
    c = case.get('config') or {}
    if c.get('per_device_train_batch_size') is None:
        raise CannotPredict('config.per_device_train_batch_size')
    if sft:
        if c.get('max_length') is None:
            raise CannotPredict('config.max_length')
    elif c.get('max_completion_length') is None:
        raise CannotPredict('config.max_completion_length')
    releases = _in_trainer_releases(case)
    if len(releases) > 1:
        return _predict_over_releases(case, arch, cap, sft, releases, replay)
    return _predict_train_on_cards(case, arch, cap, sft, releases[0] if releases else None, replay)


# ms-swift releases whose in-trainer vLLM placement differs (frontends/swift/versions.py in_trainer_vllm): 3.1.x
# (vllm_device auto = the GPU after the training ones), 3.2.0-3.2.1 (the last num_infer_workers GPUs), 3.2.2-3.4
# (the same, after _check_grpo's layout assertion), 3.5 (the names deprecated and ignored: vllm_mode colocate)
IN_TRAINER_RELEASES = ('3.1.1', '3.2.0', '3.2.2', '3.5.0')


def _in_trainer_releases(case: dict) -> list[str]:
    """The ms-swift releases to place a case's in-trainer vLLM with: its stated release, else every placement the
    releases that had ``vllm_device``/``num_infer_workers`` (3.1-3.5) used; [] for a case without them."""
    c = case.get('config') or {}
    if _is_trl(case) or not any(c.get(k) not in (None, '') for k in ('vllm_device', 'num_infer_workers')):
        return []
    stated = stated_version(case, 'ms-swift') or case.get('framework_version')
    vt = version_tuple(stated)
    if vt is not None and len(vt) >= 2 and (3, 1) <= vt[:2] < (3, 6):
        return [str(stated)]
    return list(IN_TRAINER_RELEASES)


def _predict_over_releases(case, arch, cap, sft, releases: list[str], replay: bool = False) -> dict:
    """A case from the releases that ran vLLM inside the trainer, not saying which: predict with each placement and
    keep the verdict only when it is the same under every one (as over cards)."""
    outs = [_predict_train_on_cards(case, arch, cap, sft, r, replay) for r in releases]
    verdicts = {(o.get('fits'), o.get('startup_failed', False)) for o in outs}
    if len(verdicts) > 1:
        raise CannotPredict(
            'framework_version (ms-swift 3.1-3.5 placed vLLM differently, and the verdict depends on '
            f'which: {", ".join(f"{r}: {_verdict_word(o)}" for r, o in zip(releases, outs))})'
        )
    out = dict(outs[0])
    out['release_candidates'] = ', '.join(releases)
    if len({o.get('peak_gib') for o in outs}) > 1:
        out.pop('peak_gib', None)
        out.pop('peak_torch_gib', None)
    return out


def _verdict_word(out: dict) -> str:
    if out.get('startup_failed'):
        return 'stops at start-up'
    return 'fits' if out.get('fits') else 'OOM'


def _predict_train_on_cards(case, arch, cap, sft, release: str | None, replay: bool = False) -> dict:
    c = case.get('config') or {}
    if cap is None:
        cards = candidates(_gpu(case))
        if cards:
            return _predict_over_cards(case, arch, cards, sft, release, replay)
        if c.get('use_vllm'):
            raise CannotPredict('gpu_total_gib')
    return _predict_train_at(case, arch, cap, sft, release, replay)


def _predict_over_cards(
    case: dict, arch: Arch, cards: list[tuple[str, float]], sft: bool, release: str | None = None, replay: bool = False
) -> dict:
    """A source that names the GPU loosely ("A100", "24GB GPUs"): predict on every card it could be and
    keep only what holds on all of them. The fit verdict counts when it is the same on each; the peak
    only when it does not depend on the card (no vLLM reservation, which is a share of the card)."""
    outs = [_predict_train_at(case, arch, cap, sft, release, replay) for _, cap in cards]
    verdicts = {(o['fits'], o.get('startup_failed', False)) for o in outs}
    names = ', '.join(f'{n} {cap} GiB' for n, cap in cards)
    if len(verdicts) > 1:
        raise CannotPredict(f'gpu_total_gib (the verdict depends on which card: {names})')
    out = dict(outs[0])  # its verdict is every card's
    out['capacity_candidates'] = names
    out.pop('peak_fraction', None)
    if len({o.get('peak_gib') for o in outs}) > 1:
        out.pop('peak_gib', None)
        out.pop('peak_torch_gib', None)
    return out


def stated_version(case: dict, package: str) -> str | None:
    """A package version the case states in its text fields (``config.env`` such as "torch 2.1.1", or
    ``framework_version``), else None."""
    c = case.get('config') or {}
    for text in (c.get('env'), c.get('versions'), case.get('framework_version')):
        if isinstance(text, str):
            m = re.search(rf'\b{re.escape(package)}\s*(?:==|=|\s)\s*v?(\d+\.\d+(?:\.\d+)?)', text, re.I)
            if m:
                return m.group(1)
    return None


def _alloc_conf(case: dict):
    """The allocator the case ran with (``allocconf.AllocConf``): its ``environ`` (else ``config``) PYTORCH_ALLOC_CONF
    / PYTORCH_CUDA_ALLOC_CONF, read as the launch reader reads them; torch's defaults when neither is stated."""
    from ..allocconf import DEFAULT, case_setting
    from ..errors import GuardError

    for where in ('environ', 'config'):
        d = case.get(where) if isinstance(case.get(where), dict) else {}
        try:
            setting = case_setting({'id': case.get('id'), 'environ': d})
        except GuardError as e:
            raise CannotPredict(f'{where} ({e})') from None
        if setting is not None:
            return setting.conf
    return DEFAULT


def _framework(case: dict):
    """The front end's ``Framework`` of the case's framework (TRL, else ms-swift)."""
    from ..frontends import FRAMEWORKS

    return FRAMEWORKS['trl' if _is_trl(case) else 'swift']


def _handover(case: dict):
    """What the case's framework runs between its phases at the release the case states (``framework.Handover``,
    the front end's ``handover`` hook); None where the case names no release minor (e.g. "3.x")."""
    package = 'trl' if _is_trl(case) else 'ms-swift'
    return _framework(case).call('handover', {package: stated_version(case, package) or case.get('framework_version')})


def _in_trainer_layout(case: dict, cfg: GRPOConfig, env: dict, release: str):
    """(config, rollout GPUs, start-up error) of a case whose ms-swift ran vLLM inside the trainer, placed by the
    front end's own reading of that release (frontends/swift/versions.py ``in_trainer_vllm``)."""
    from ..frontends.swift.versions import in_trainer_vllm
    from ..launch import Launch

    c = case.get('config') or {}
    argv = []
    for key in ('vllm_device', 'num_infer_workers'):
        v = c.get(key)
        if v not in (None, ''):
            argv += [f'--{key}', *([str(x) for x in v] if isinstance(v, list) else str(v).split())]
    try:
        cfg, launch, _ = in_trainer_vllm(cfg, Launch(argv=argv, env=dict(env)), release)
    except ValueError as e:  # a value the release's own parser rejects (swift_args.ArgumentError)
        raise CannotPredict(f'config ({e})') from None
    info = launch.trl.swift_infer_workers or {}
    g = launch.trl.vllm_device_gpu
    return cfg, (tuple(g) if g is not None else None), (info.get('error') or (None,))[0]


def _predict_train_at(
    case: dict, arch: Arch, cap: float | None, sft: bool, release: str | None = None, replay: bool = False
) -> dict:
    c = case.get('config') or {}
    use_vllm = bool(c.get('use_vllm'))
    extra: dict = {'rlhf_type': 'grpo'}
    if sft:
        extra.update(max_completion_length=c['max_length'], beta=0.0, use_vllm=False)
    if _is_trl(case) and not sft:
        cfg, env = _trl_config(case)
    else:
        cfg, env = _config(case, extra)
    if sft:
        cfg = replace(cfg, use_vllm=False, vllm_mode=None)
    if use_vllm and cfg.vllm_mode is None:
        cfg = replace(cfg, vllm_mode='colocate')  # ms-swift 3.6-3.11 default
    n = int(case.get('num_gpus') or 1)
    env.setdefault('NPROC_PER_NODE', str(n))
    if not env['NPROC_PER_NODE'].isdigit() or int(env['NPROC_PER_NODE']) < 1:
        raise CannotPredict(f'config.NPROC_PER_NODE (a positive integer, got {env["NPROC_PER_NODE"]!r:.40})')
    rollout_gpus = None
    if release is not None:  # ms-swift 3.1-3.5's in-trainer vLLM, on the GPUs the case makes visible
        env.setdefault('CUDA_VISIBLE_DEVICES', ','.join(str(i) for i in range(n)))
        cfg, rollout_gpus, error = _in_trainer_layout(case, cfg, env, release)
        if error:
            return {'fits': False, 'startup_failed': True, 'reasons': ['device.infer-workers'], 'error': error}
        n = max(n, len(env['CUDA_VISIBLE_DEVICES'].split(',')))
    else:
        env['CUDA_VISIBLE_DEVICES'] = ','.join(str(i) for i in range(int(env['NPROC_PER_NODE'])))
    plan = build_plan(cfg, env, Hardware(gpus=n, rollout_gpus=rollout_gpus))
    prompt = 0 if sft else (cfg.max_length or 0)
    lengths = case.get('prompt_tokens') or {}  # the data's prompt lengths, where the case states them
    if not sft and isinstance(lengths.get('max'), int):
        prompt = min(prompt, lengths['max']) if prompt else lengths['max']
    shortest = lengths.get('min')
    windows = (case.get('outcome') or {}).get('logits_windows') or []
    if not sft and windows:  # the windows the run made (bench_swift_gpu.py records them): plan the largest it saw
        prompt = max(w['prompt_max'] for w in windows)
        shortest = prompt - max(0, max(w['logits_to_keep'] for w in windows) - cfg.max_completion_length)
    torch_v, tf_v = stated_version(case, 'torch'), stated_version(case, 'transformers')
    adamw, _ = resolve_adamw(cfg.optim, torch_v, tf_v)
    inp = Inputs(
        arch=arch,
        capacity_gib=cap or 1e9,
        gpu_name=_gpu(case),
        prompt_len=prompt,
        logits_from_prompt=None if sft else logits_from(cfg, _framework(case).logits_span_prompts, shortest),
        sft=sft,
        adamw=adamw,
        alloc=None if sft else _alloc_conf(case),
        # a harness's step (bench/bench_gpu_memory.py: beta 0, no old-policy pass) is no framework's
        framework=None if sft or case.get('step') == 'harness' else _framework(case),
        handover=None if sft else _handover(case),
        vllm_version=stated_version(case, 'vllm'),  # how a colocated engine counts the trainer (vllm_engine)
    )  # the reserve was derived from GRPO steps only
    replayed = None
    if replay and not sft and inp.alloc is not None:
        inp.replayed, replayed = _replayed(case, cfg, plan, inp)

    def peak(inputs: Inputs):
        # like with like: the device figure (nvidia-smi, OOM) and torch's reserved bytes (ms-swift's memory(GiB))
        m = max(estimate(cfg, plan, inputs), key=lambda x: x.total_gib)
        return m, round(m.total_gib, 2), m.quantities['reserved_gib']

    m, total, torch_only = peak(inp)
    out = {
        'peak_gib': total,
        'peak_torch_gib': torch_only,
        'quantities': m.quantities,
        'phase': m.phase,
        'dominant': next(iter(m.phase_terms), ''),
    }
    if cfg.optim is None and torch_v is None and tf_v is None and adamw in ('fused', 'foreach'):
        # the case states neither version, and transformers' default AdamW depends on both (memory.resolve_adamw):
        # the peak is known only as the range over the two (a range, not a fitted choice)
        other_inp = replace(inp, adamw='foreach' if adamw == 'fused' else 'fused')
        if replayed:  # the other optimizer's step replayed too: a range of like with like
            other_inp.replayed = _replayed(case, cfg, plan, other_inp)[0]
        _, other, other_torch = peak(other_inp)
        if abs(other - total) > 0.01 * total:
            out['peak_range_gib'] = sorted([total, other])
            out['peak_torch_range_gib'] = sorted([torch_only, other_torch])
            out['range_why'] = (
                'torch/transformers not stated: AdamW fused (transformers >= 4.54 on torch >= 2.8) or foreach (before)'
            )
    c = case.get('config') or {}
    if c.get('padding_free') or c.get('packing'):
        # packed rows hold the batch's real tokens; planning puts every row at max_length, an upper bound
        out['peak_bound'] = 'padding_free/packing packs the real tokens and the case states no sample lengths'
    longer = _window_longer_than_before(windows)
    if longer is not None:
        # torch keeps the segments a longer logits block made where the card has room, and frees them and retries
        # before an out-of-memory error where it has not (memory/allocator.py; bench/bench_reserve_windows.py: the
        # H200's 566, 550, 568 run reserved 105.6 GiB with 54.7 allocated, and runs through under a 64.2 GiB cap)
        out['peak_floor'] = (
            f'a later micro-batch made a logits window of {longer} positions, longer than every one before it: '
            'the measured peak holds the segments torch kept on a card with room'
        )
    if replayed:
        out['replayed'] = replayed
    if cap is not None:
        out['fits'] = m.fits
        out['peak_fraction'] = m.peak_fraction
    return out


def _replayed(case: dict, cfg: GRPOConfig, plan, inp: Inputs) -> tuple:
    """(``Inputs.replayed``, the line saying how) for a case's GRPO step, as its framework runs it."""
    from .replay import replayed_reserve

    try:
        return replayed_reserve(cfg, plan, case['model_config'], inp, _framework(case))
    except (ValueError, TypeError, KeyError) as e:  # a model transformers or PEFT cannot build from the case's config
        return None, f'not replayed ({type(e).__name__}: {str(e)[:80]}); the closed form'
