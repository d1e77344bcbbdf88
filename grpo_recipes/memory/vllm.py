"""One vLLM engine on one GPU: its reservation, weights, profiling peak and KV cache (``vllm_terms``), the
defaults it picks, and its own start-up checks (``vllm_checks``)."""

from __future__ import annotations

import json
import math

from ..config import GRPOConfig
from ..gpus import sm_count
from ..plan import Plan
from ..versions import version_tuple
from . import vllm_engine as ve
from . import vllm_startup as vs
from .arch import Arch
from .inputs import (
    KV_BLOCK,
    SAMPLER_BUFFERS,
    TRITON_SAMPLER_BUFFERS,
    TRITON_SAMPLER_FROM,
    TRITON_SAMPLER_MAX_SMS,
    TRITON_SAMPLER_MIN_ROWS,
    VLLM_CUDA_GRAPHS,
    VLLM_GRAPHS_PROFILED_FROM,
    VLLM_NON_TORCH_TP,
    VLLM_NON_TORCH_TP1,
    GiB,
    Inputs,
    _g,
)


def _vllm_large_card(capacity_gib: float, gpu_name: str | None) -> bool:
    """vLLM V1 picks its larger defaults on >= 70 GiB cards other than the A100
    (vllm/engine/arg_utils.py ``_set_default_args``)."""
    return capacity_gib >= 70 and 'A100' not in (gpu_name or '').upper()


def vllm_default_batched_tokens(capacity_gib: float, gpu_name: str | None, offline: bool = True) -> int:
    """vLLM V1 default max_num_batched_tokens (vllm/engine/arg_utils.py ``_set_default_args``):
    LLM class 16384 / API server 8192 on >= 70 GiB non-A100 cards, else 8192 / 2048."""
    big = _vllm_large_card(capacity_gib, gpu_name)
    if offline:
        return 16384 if big else 8192
    return 8192 if big else 2048


# vLLM turned FlashInfer's top-k/top-p sampler back on by default in 0.21.0 (vllm PR #40376: vllm/envs.py
# ``VLLM_USE_FLASHINFER_SAMPLER: bool = True`` in the 0.21.0, 0.22.0 and 0.23.0 wheels, ``bool | None = None`` and
# opt-in in 0.20.0), on cards FlashInfer supports (v1/sample/ops/topk_topp_sampler.py: compute capability 7.5 to
# 12.1, FlashInferBackend.supports_compute_capability; below it vLLM falls back to the native sampler).
FLASHINFER_SAMPLER_DEFAULT_FROM = (0, 21, 0)
FLASHINFER_CAPABILITY = ((7, 5), (12, 1))


def resolve_sampler(
    env_value: str | None, vllm_version: str | None, flashinfer_installed: bool | None, gpu_name: str | None = None
) -> tuple[str, str]:
    """Which top-k/top-p sampler vLLM's profiling run uses: ``native`` (sorts the vocabulary, or from 0.17 masks it
    with a Triton kernel: ``sampler_buffers``) or ``flashinfer``, and why. Unknown means ``native``, the larger
    reservation, so predicted KV is a floor.

    - ``VLLM_USE_FLASHINFER_SAMPLER`` decides when set (vllm/envs.py).
    - Without FlashInfer installed, vLLM samples natively.
    - With it installed, V1 used it by default until 0.11.1 (vllm PR #11394; PR #26859 turned the default
      off in October 2025), and again from 0.21.0 (``FLASHINFER_SAMPLER_DEFAULT_FROM``) on the cards FlashInfer
      supports.
    - Whether it is installed, when not known: ``pip install vllm`` did not bring FlashInfer before
      0.11.1 (an optional extra, vllm PR #21959; a default dependency from PR #26443), so native then, and
      installed from 0.11.1.
    """
    if env_value is not None and env_value.strip() != '':
        on = env_value.strip().lower() in ('1', 'true', 'yes', 'on')
        return ('flashinfer' if on else 'native'), f'VLLM_USE_FLASHINFER_SAMPLER={env_value}'
    if flashinfer_installed is False:
        return 'native', 'FlashInfer is not installed'
    parts = version_tuple(vllm_version)
    if parts and parts >= FLASHINFER_SAMPLER_DEFAULT_FROM:
        cc = ve.compute_capability(gpu_name)
        low, high = FLASHINFER_CAPABILITY
        if cc is not None and not low <= cc <= high:
            return 'native', (
                f'vLLM {vllm_version}: FlashInfer sampling is on by default from 0.21.0, but not on compute '
                f'capability {cc[0]}.{cc[1]}, where vLLM falls back to the native sampler'
            )
        return 'flashinfer', (
            f'vLLM {vllm_version}: FlashInfer sampling is on by default from 0.21.0 (VLLM_USE_FLASHINFER_SAMPLER '
            f'defaults to 1; FlashInfer is installed with vLLM from 0.11.1)'
        )
    if parts and parts >= (0, 11, 1):
        return 'native', (
            f'vLLM {vllm_version}: FlashInfer sampling is off by default from 0.11.1 to 0.20 (opt-in with '
            'VLLM_USE_FLASHINFER_SAMPLER=1), so the native sampler'
        )
    if parts and parts < (0, 8, 0):
        return 'native', f'vLLM {vllm_version}: the V0 engine sorts natively'
    if parts and flashinfer_installed:
        return 'flashinfer', f'vLLM {vllm_version} with FlashInfer installed samples with FlashInfer'
    if parts:
        return 'native', f'vLLM {vllm_version}: a pip install has no FlashInfer, so the native sampler'
    return 'native', 'vLLM version not known; assumed native, the larger profiling reservation'


def graphs_profiled(vllm_version: str | None, env_value: str | None) -> bool:
    """Whether vLLM's memory profiler counts CUDA graphs inside ``gpu_memory_utilization`` (then the KV cache is
    smaller by them and nothing comes on top): the variable decides when set, else the version
    (``VLLM_GRAPHS_PROFILED_FROM``); an unknown version means on top, the larger footprint."""
    if env_value is not None and env_value.strip() != '':
        return env_value.strip().lower() in ('1', 'true', 'yes', 'on')
    v = version_tuple(vllm_version)
    return v is not None and v >= VLLM_GRAPHS_PROFILED_FROM


def _positive_int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def vllm_engine_options(cfg: GRPOConfig) -> dict:
    """The JSON object in ``vllm_engine_kwargs`` ({} when unset or not an object)."""
    if not cfg.vllm_engine_kwargs:
        return {}
    try:
        value = json.loads(cfg.vllm_engine_kwargs)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def vllm_kv_bytes_per_token(cfg: GRPOConfig, a: Arch) -> float:
    """KV cache bytes per token on one TP rank: the model dtype (vLLM ``kv_cache_dtype`` "auto"), or one
    byte for an fp8 cache."""
    kv_dtype = str(vllm_engine_options(cfg).get('kv_cache_dtype') or 'auto')
    return a.kv_bytes_per_token(1 if kv_dtype.startswith('fp8') else a.dtype_bytes) / max(
        1, cfg.vllm_tensor_parallel_size
    )


# Model types whose vLLM MLP is Qwen2MLP (vllm/model_executor/models/qwen2.py; qwen3.py imports it as Qwen3MLP; the
# Qwen2-VL and Qwen2.5-VL language models are Qwen2Model), vLLM 0.8.4: its forward binds gate_up to a local name of
# its own, so under eager execution gate_up is still referenced while down_proj writes its output
QWEN2_MLP_TYPES = frozenset({'qwen2', 'qwen2_vl', 'qwen2_5_vl', 'qwen3'})


def eager_down_proj_extra(a: Arch, eager: bool) -> int:
    """Values per token the eager MLP holds beyond 2h + 3I/tp: Qwen2MLP.forward (vLLM 0.8.4 qwen2.py) keeps
    ``gate_up`` referenced through ``down_proj``, so at that moment the normed input and the residual (2h), gate_up
    (2I), the activation output (I) and down_proj's full-width output (h) are live: 3h + 3I. LlamaMLP.forward
    (llama.py) rebinds ``x``, so its gate_up is freed first and 2h + 3I stays its peak. Only where the forward runs
    eagerly (the V0 engine: CompilationConfig.level defaults to NO_COMPILATION, vllm/config.py 0.8.4); V1 compiles
    the model (VllmConfig.__post_init__ sets CompilationLevel.PIECEWISE with Inductor), whose generated code frees
    each buffer after its last use."""
    return a.hidden if eager and a.model_type.lower() in QWEN2_MLP_TYPES else 0


def sampler_buffers(sampler: str, rows: int, vocab: int, vllm_version: str | None, gpu_name: str | None) -> float:
    """Bytes the sampler of vLLM's profiling run holds at its peak on ``rows`` dummy requests: ``SAMPLER_BUFFERS``
    R x V fp32 buffers, or, for the native sampler from vLLM 0.17.0 on 8 or more rows, the Triton kernel's
    (``TRITON_SAMPLER_BUFFERS`` and one row per program). An unknown version keeps the sort, the larger figure."""
    row = vocab * 4
    v = version_tuple(vllm_version)
    if sampler == 'native' and v is not None and v >= TRITON_SAMPLER_FROM and rows >= TRITON_SAMPLER_MIN_ROWS:
        sms = sm_count(gpu_name) or TRITON_SAMPLER_MAX_SMS
        programs = min(sms, rows)
        buffer_rows = min(1 << (programs - 1).bit_length(), sms)  # next_power_of_2, at most the SMs
        return TRITON_SAMPLER_BUFFERS * rows * row + buffer_rows * row
    return SAMPLER_BUFFERS[sampler] * rows * row


def vllm_profile_peak(
    a: Arch,
    tp: int,
    tokens: int,
    seqs: int,
    sampler: str = 'native',
    eager: bool = False,
    vllm_version: str | None = None,
    gpu_name: str | None = None,
) -> float:
    """Peak torch memory of vLLM's profiling run (vllm/v1/worker/gpu_model_runner.py ``profile_run``),
    bytes: the dummy forward over ``tokens`` tokens, or, after it, its hidden states plus the sampler on
    ``min(seqs, tokens)`` rows of full-vocabulary logits (``sampler_buffers``), whichever is larger. ``eager``: the
    V0 engine's uncompiled forward (``eager_down_proj_extra``)."""
    act_bytes = a.dtype_bytes
    inter = a.token_mlp_width
    # forward: residual + normed hidden (2h) beside the MLP's gate_up (2I) and activation output (I), per rank
    forward = tokens * act_bytes * (2 * a.hidden + 3 * inter / tp + eager_down_proj_extra(a, eager))
    rows = min(seqs, tokens)
    sampler_peak = tokens * a.hidden * act_bytes + sampler_buffers(sampler, rows, a.vocab, vllm_version, gpu_name)
    return max(forward, sampler_peak)


def vllm_terms(cfg: GRPOConfig, inp: Inputs, plan: Plan | None = None) -> dict[str, float]:
    """One vLLM engine shard on one GPU (bytes). A colocated engine needs ``plan`` (its steps_per_generation)."""
    a = inp.arch
    tp = max(1, cfg.vllm_tensor_parallel_size)
    cap = inp.capacity_gib * GiB
    requested = cfg.vllm_gpu_memory_utilization * cap
    offline = inp.vllm_entry == 'offline'
    opts = vllm_engine_options(cfg)
    # as vLLM loads them (--quantization, bnb, GPTQ/AWQ/FP8), per rank: split by TP, the experts by TP x DP under EP
    weights = vs.per_rank_weight_bytes(cfg, a, opts)
    tb = _positive_int(opts.get('max_num_batched_tokens'))
    # V1 became the default engine in vLLM 0.8.0; 0.8-0.9 fall back to V0 on pre-Ampere cards, fp8 KV, fp32
    # (vllm_engine)
    v0 = ve.uses_v0(inp.vllm_version, inp.gpu_name, opts.get('kv_cache_dtype'), a.dtype, inp.vllm_use_v1_env)
    max_len = _max_model_len(cfg, a)
    if not tb and v0 and max_len <= 32768:
        # V0 without chunked prefill (its default up to a 32K context; longer contexts turn chunked prefill
        # on, vllm/engine/arg_utils.py): SchedulerConfig max_num_batched_tokens = max(max_model_len, 2048)
        # (vllm/config.py), and the profiling run fills that many tokens
        tb = max(max_len, 2048)
    if not tb:
        tb = vllm_default_batched_tokens(inp.capacity_gib, inp.gpu_name, offline=offline)
    seqs = cfg.vllm_max_num_seqs or _positive_int(opts.get('max_num_seqs'))
    if not seqs and v0:
        seqs = 256  # V0 EngineArgs max_num_seqs default
    if not seqs and cfg.vllm_mode == 'colocate' and offline:
        # ms-swift colocate: per_device_train_batch_size x TP x steps_per_generation (rollout_mixin), the
        # steps_per_generation ms-swift derives (args_mixin _init_generation_batch_params): the Plan's. None only when
        # generation_batch_size does not divide, which the batch rules report and ms-swift refuses
        if plan is None:
            raise ValueError('vllm_terms: a colocated engine is sized from the Plan (its steps_per_generation)')
        spg = plan.steps_per_generation or 1
        seqs = cfg.per_device_train_batch_size * tp * spg
    elif not seqs:
        seqs = 1024 if _vllm_large_card(inp.capacity_gib, inp.gpu_name) else 256  # vLLM V1 default max_num_seqs
    act = vllm_profile_peak(
        a, tp, tb, seqs, inp.vllm_sampler, eager=v0, vllm_version=inp.vllm_version, gpu_name=inp.gpu_name
    )
    # multimodal models: the encoder's profiling pass on the largest items, its outputs cached (vllm_startup)
    limits = vs.parse_limits(opts.get('limit_mm_per_prompt', getattr(cfg, 'vllm_limit_mm_per_prompt', None)))
    mmkw = opts.get('mm_processor_kwargs')  # max_pixels / min_pixels bound the largest image (vllm_engine)
    mm = (
        vs.mm_profile_v0(a, tp, tb, seqs, max_len, limits, processor_kwargs=mmkw)
        if v0
        else vs.mm_profile(
            a,
            tp,
            tb,
            seqs,
            max_len,
            limits,
            opts.get('enable_chunked_prefill') is not False,
            vllm_version=inp.vllm_version,
            processor_kwargs=mmkw,
        )
    )
    llm_tokens = tb
    if mm and mm.get('rows'):  # V0 samples only the sequences that carry the dummy items, over all their tokens
        llm_tokens = mm.get('llm_tokens', tb)
        act = vllm_profile_peak(
            a,
            tp,
            llm_tokens,
            mm['rows'],
            inp.vllm_sampler,
            eager=True,
            vllm_version=inp.vllm_version,
            gpu_name=inp.gpu_name,
        )
    act = vs.profile_with_encoder(act, llm_tokens, a, mm)
    non_torch = VLLM_NON_TORCH_TP if tp > 1 else VLLM_NON_TORCH_TP1
    graphs = vs.cuda_graph_bytes(vs.capture_sizes(inp.vllm_version, seqs, tb, cfg.vllm_enforce_eager), VLLM_CUDA_GRAPHS)
    # V1 sizes the KV cache from what the profile left: requested - weights - peak activation - non-torch; CUDA
    # graphs are captured afterwards and come on top, unless the profiler estimates them (graphs_profiled): then
    # they come out of the KV budget and stay inside the reservation
    inside = bool(graphs) and graphs_profiled(inp.vllm_version, inp.vllm_graphs_env)
    rope = ve.rope_cache_bytes(a)  # the rotary cos/sin buffer, loaded with the model on every rank (vllm_engine)
    kv = requested - weights - rope - act - non_torch - (graphs if inside else 0.0)
    return {
        'requested': requested,
        'weights': weights,
        'rope_cache': rope,
        'activation': act,
        'non_torch': non_torch,
        'cuda_graphs': graphs,
        'kv_cache': kv,
        'graphs_outside': 0.0 if inside else graphs,
    }


def _max_model_len(cfg: GRPOConfig, a: Arch) -> int:
    return cfg.vllm_max_model_len or a.context_len


def vllm_checks(cfg: GRPOConfig, plan: Plan, inp: Inputs, v: dict, free_at_start: float, problems: list[dict]) -> dict:
    """vLLM's own checks: start-up free memory, the KV cache against what else holds the GPU at start (settled into
    ``v['kv_cache']`` as the version counts it, ``vllm_engine.kv_accounting``), one max-length sequence, rollout
    concurrency."""
    a = inp.arch
    cap = inp.capacity_gib * GiB
    opts = vllm_engine_options(cfg)
    v0 = ve.uses_v0(inp.vllm_version, inp.gpu_name, opts.get('kv_cache_dtype'), a.dtype, inp.vllm_use_v1_env)
    accounting = ve.kv_accounting(inp.vllm_version, v0)
    others = max(0.0, cap - free_at_start)  # the trainer's resident terms, the CUDA context, NCCL
    if accounting == 'device':
        # V1 before 0.9.1 counts every byte the device holds outside this process's torch allocations
        v['kv_cache'] -= others
    block = _positive_int(opts.get('block_size')) or KV_BLOCK
    kv_per_token = vllm_kv_bytes_per_token(cfg, a)
    mml = _max_model_len(cfg, a)
    per_token = vs.bytes_per_token(kv_per_token, a, max(1, cfg.vllm_tensor_parallel_size), mml)  # + hybrid state
    kv_tokens = max(0, int(v['kv_cache'] // per_token)) // block * block if kv_per_token else 0
    override = _positive_int(opts.get('num_gpu_blocks_override'))
    if override:
        # both engines replace the profiled block count with it (V0 engine/llm_engine.py _initialize_kv_caches, V1
        # v1/core/kv_cache_utils.py may_override_num_blocks)
        kv_tokens = override * block
    info = {
        'requested_gib': _g(v['requested']),
        'weights_gib': _g(v['weights']),
        'activation_gib': _g(v['activation']),
        'non_torch_gib': _g(v['non_torch']),
        'sampler': inp.vllm_sampler,
        'sampler_basis': inp.vllm_sampler_why,
        'kv_cache_gib': _g(max(0.0, v['kv_cache'])),
        'kv_accounting': accounting,
        'cuda_graphs_in_budget_gib': _g(v['cuda_graphs'] - v['graphs_outside']),
        'kv_tokens': kv_tokens,
        'max_model_len': mml,
    }
    if v['weights'] > cap:
        problems.append(
            {
                'check': 'vllm.weights-exceed-gpu',
                'phase': 'startup',
                'message': (
                    f'the model weights alone ({v["weights"] / GiB:.2f} GiB per GPU) exceed the GPU ({cap / GiB:.2f} '
                    'GiB): '
                    f'CUDA out of memory while loading'
                ),
            }
        )
    elif free_at_start < v['requested'] and accounting == 'snapshot':
        problems.append(
            {
                'check': 'vllm.startup-free-memory',
                'phase': 'startup',
                'message': (
                    f'Free memory on device ({free_at_start / GiB:.2f}/{cap / GiB:.2f} GiB) on startup is less than '
                    f'desired GPU memory utilization ({cfg.vllm_gpu_memory_utilization}, {v["requested"] / GiB:.2f} '
                    'GiB). '
                    f'[vLLM init_device]'
                ),
            }
        )
    elif free_at_start < v['requested'] and accounting == 'own' and v['kv_cache'] > 0:
        # V0 takes util x total for itself whatever else holds the GPU; the cache allocation is what runs out
        problems.append(
            {
                'check': 'vllm.startup-free-memory',
                'phase': 'startup',
                'message': (
                    f'CUDA out of memory while allocating the KV cache: the V0 engine of vLLM {inp.vllm_version} '
                    f'sizes its cache to fill gpu_memory_utilization x total ({v["requested"] / GiB:.2f} GiB) '
                    f'without counting what other processes hold, and only {free_at_start / GiB:.2f} GiB was free '
                    '[vLLM worker.py initialize_cache]'
                ),
            }
        )
    capture_room = cap if accounting == 'device' else free_at_start  # 'device': util x total holds the others too
    started = v['weights'] <= cap and (accounting == 'device' or free_at_start >= v['requested'])
    if (
        started
        and v['graphs_outside'] > 0
        and v['kv_cache'] > 0
        and v['requested'] + v['graphs_outside'] > capture_room
    ):
        # graphs are captured after the KV cache fills the reservation (V0 worker.py initialize_cache ->
        # _warm_up_model -> capture_model; V1 gpu_worker.py compile_or_warm_up_model -> capture_model, after
        # initialize_from_config) and, before the profiler estimated them (graphs_profiled), on top of it
        problems.append(
            {
                'check': 'vllm.graph-capture-oom',
                'phase': 'startup',
                'message': (
                    f'CUDA out of memory while capturing CUDA graphs: vLLM {inp.vllm_version or ""} captures them '
                    f'after its KV cache fills gpu_memory_utilization ({v["requested"] / GiB:.2f} GiB) and about '
                    f'{v["graphs_outside"] / GiB:.2f} GiB more is needed beyond it, where '
                    f'{max(0.0, capture_room - v["requested"]) / GiB:.2f} GiB is left (enforce_eager or a lower '
                    'gpu_memory_utilization avoids it)'
                ),
            }
        )
    if v['kv_cache'] <= 0 and not override:
        why = (
            f" (vLLM {inp.vllm_version}'s V1 engine counts the {others / GiB:.2f} GiB other processes and the CUDA "
            'context hold against the cache)'
            if accounting == 'device' and others
            else ''
        )
        problems.append(
            {
                'check': 'vllm.no-kv-memory',
                'phase': 'startup',
                'message': (
                    'No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when '
                    f'initializing the engine. [vLLM]{why}'
                ),
            }
        )
    elif v0 and override:
        # V0 checks the overridden block count (worker.py raise_if_cache_size_invalid)
        if mml > kv_tokens:
            problems.append(
                {
                    'check': 'vllm.kv-one-sequence',
                    'phase': 'startup',
                    'message': (
                        f"The model's max seq len ({mml}) is larger than the maximum number of tokens that can be "
                        f'stored in KV cache ({kv_tokens}). Try increasing `gpu_memory_utilization` or decreasing '
                        f'`max_model_len` when initializing the engine. [vLLM {inp.vllm_version}]'
                    ),
                }
            )
    elif v['kv_cache'] > 0:
        need = math.ceil(mml / block) * block * kv_per_token + vs.linear_state_bytes(
            a, max(1, cfg.vllm_tensor_parallel_size), a.dtype_bytes
        )  # hybrid models: one request's linear state
        if need > v['kv_cache']:
            # vLLM's estimate is the longest length whose whole blocks fit (estimate_max_model_len binary-searches
            # cdiv(len, block_size) x page size against the available memory): a multiple of the block size
            est = block * int(v['kv_cache'] // (block * kv_per_token))
            if v0:
                # the V0 worker (vllm/worker/worker.py raise_if_cache_size_invalid): block_size x num_gpu_blocks
                message = (
                    f"The model's max seq len ({mml}) is larger than the maximum number of tokens that can be "
                    f'stored in KV cache ({est}). Try increasing `gpu_memory_utilization` or decreasing '
                    f'`max_model_len` when initializing the engine. [vLLM {inp.vllm_version}]'
                )
            else:
                # V1 (vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory), in the version's words
                message = vs.one_sequence_message(inp.vllm_version, mml, need / GiB, v['kv_cache'] / GiB, est)
            problems.append({'check': 'vllm.kv-one-sequence', 'phase': 'startup', 'message': message})
    conc = plan.rollout_concurrency_per_engine
    if conc:
        seq = min(mml, (inp.prompt_len or 0) + cfg.max_completion_length)
        want = conc * seq
        info['rollout_tokens'] = int(want)
        info['rollout_concurrency'] = conc
        if kv_tokens and want > kv_tokens:
            # throughput, not memory: an info (it would fire on most long-completion launches at their limits)
            problems.append(
                {
                    'check': 'vllm.kv-concurrency',
                    'phase': 'rollout',
                    'severity': 'info',
                    'message': (
                        f'a rollout sends {conc:g} sequences of up to {seq} tokens to each engine ({int(want):,} '
                        'tokens at '
                        f'the longest) but the KV cache holds {kv_tokens:,}: vLLM queues or preempts and recomputes '
                        'the '
                        f'rest (slower, same memory)'
                    ),
                }
            )
    return info
