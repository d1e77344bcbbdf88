"""vLLM and rollout options: tensor/data parallel sizes, server endpoints, modes and mode-only options."""

from __future__ import annotations

import re

from ..divisors import divisors
from ..findings import ERROR, INFO, WARNING, Finding
from ..versions import version_tuple
from .registry import Context, rule


@rule('vllm.colocate-tp')
def colocate_tp_divides_world(ctx: Context) -> list[Finding]:
    """Colocate mode splits the trainer processes into vLLM TP groups: ms-swift asserts
    "vllm_tensor_parallel_size must divide world size" (swift/rlhf_trainers/rollout_mixin.py)."""
    cfg, p = ctx.cfg, ctx.plan
    tp = cfg.vllm_tensor_parallel_size
    if not (cfg.rollout_mode == 'colocate') or tp <= 0:
        return []
    if p.world_size % tp:
        valid = divisors(p.world_size) or []
        return [
            Finding(
                ERROR,
                'vllm.colocate-tp',
                ['vllm_tensor_parallel_size', 'NPROC_PER_NODE'],
                f'vllm_tensor_parallel_size ({tp}) must divide world size ({p.world_size}) evenly.',
                f'vllm_tensor_parallel_size: one of {valid}',
                'swift/rlhf_trainers/rollout_mixin.py',
            )
        ]
    return []


@rule('vllm.tp-heads')
def tp_divides_heads(ctx: Context) -> list[Finding]:
    """vLLM shards attention heads over TP ranks and refuses a TP that does not divide them
    (vllm/config/model.py, ``verify_with_parallel_config``), at engine start."""
    from ..memory.vllm_engine import tp_heads_refusal

    cfg = ctx.cfg
    heads = (ctx.model or {}).get('num_attention_heads')
    refusal = tp_heads_refusal(heads, cfg.vllm_tensor_parallel_size) if cfg.use_vllm else None
    if refusal is None:
        return []
    valid = [t for t in divisors(heads) or [] if t <= 16]
    return [
        Finding(
            ERROR,
            'vllm.tp-heads',
            ['vllm_tensor_parallel_size'],
            f'{refusal} [vLLM, at engine start]',
            f'vllm_tensor_parallel_size: one of {valid}',
            'vllm/config/model.py (verify_with_parallel_config)',
        )
    ]


@rule('vllm.parallel-size')
def tp_positive(ctx: Context) -> list[Finding]:
    """vLLM TP/DP sizes below 1: ms-swift hands them to vLLM's engine arguments (swift/infer_engine/vllm_engine.py),
    where no parallel group of that size can be formed."""
    cfg = ctx.cfg
    bad = [n for n in ('vllm_tensor_parallel_size', 'vllm_data_parallel_size') if getattr(cfg, n) < 1]
    return [
        Finding(ERROR, 'vllm.parallel-size', [n], f'{n} must be >= 1 (got {getattr(cfg, n)})', f'{n}: 1') for n in bad
    ]


_HOST_RE = re.compile(r'^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9\-\.]*[A-Za-z0-9])?$|^\[?[0-9a-fA-F:]+\]?$')


@rule('trl.vllm-device')
def trl_old_vllm_device(ctx: Context) -> list[Finding]:
    """TRL 0.14-0.15 started vLLM inside the trainer on ``vllm_device`` and checked it the way quoted here
    (trl v0.15 trl/trainer/grpo_trainer.py, GRPOTrainer.__init__)."""
    idx = ctx.launch.trl.vllm_device_index
    if idx is None:
        return []
    p = ctx.plan
    count = p.visible_count
    nproc = p.processes_per_node * max(1, p.nnodes)
    src = 'trl v0.15 trl/trainer/grpo_trainer.py (GRPOTrainer.__init__)'
    if count is not None and idx >= count:
        return [
            Finding(
                ERROR,
                'trl.vllm-device',
                ['vllm_device', 'NPROC_PER_NODE'],
                f'The requested device for vllm (cuda:{idx}) is not available. You are likely using vLLM '
                f'without restricting the number of GPUs for training. [{count} GPU(s) visible, {nproc} '
                f'training process(es)]',
                f'ENV: {{NPROC_PER_NODE: {max(1, count - 1)}}} (one visible GPU left for vLLM), or upgrade '
                f'TRL and run vLLM as a server: --vllm_mode server with `trl vllm-serve` on its own GPU',
                src,
            )
        ]
    if idx < nproc and count != 1:
        return [
            Finding(
                WARNING,
                'trl.vllm-device',
                ['vllm_device'],
                f'The requested device cuda:{idx} is also being used for training: vLLM reserves '
                f'{ctx.cfg.vllm_gpu_memory_utilization:.0%} of it beside a training process',
                f'ENV: {{NPROC_PER_NODE: {max(1, nproc)}}} with one more visible GPU, and --vllm_device cuda:{nproc}',
                src,
            )
        ]
    return []


@rule('server.host', 'server.url', 'server.ports')
def server_endpoints(ctx: Context) -> list[Finding]:
    """Server mode's address lists: ms-swift asserts a host or base URL (swift/arguments/rlhf_args.py) and
    its VLLMClient needs one port per host (swift/rlhf_trainers/vllm_client.py, ValueError)."""
    cfg = ctx.cfg
    if not cfg.use_vllm or cfg.vllm_mode != 'server' or cfg.vllm_in_trainer:  # no server to reach
        return []
    out = []
    if not cfg.vllm_server_host and not cfg.vllm_server_base_url:
        return [
            Finding(
                ERROR,
                'server.host',
                ['vllm_server_host'],
                'vllm_mode server needs vllm_server_host (or vllm_server_base_url); ms-swift fails with a '
                'bare AssertionError',
                'vllm_server_host: [127.0.0.1]',
                'swift/arguments/rlhf_args.py',
            )
        ]
    if cfg.vllm_server_base_url:
        for url in cfg.vllm_server_base_url:
            if not re.match(r'^https?://[^/\s:]+(:\d{1,5})?(/.*)?$', url):
                out.append(
                    Finding(
                        ERROR,
                        'server.url',
                        ['vllm_server_base_url'],
                        f'vllm_server_base_url {url!r} is not an http(s)://host[:port] URL',
                        'vllm_server_base_url: [http://127.0.0.1:8000]',
                    )
                )
        return out
    hosts = cfg.vllm_server_host or []
    for h in hosts:
        if not _HOST_RE.match(h):
            out.append(
                Finding(
                    ERROR,
                    'server.host',
                    ['vllm_server_host'],
                    f'vllm_server_host {h!r} is not a hostname or IP address',
                    'vllm_server_host: [127.0.0.1]',
                )
            )
    ports = cfg.vllm_server_port or []
    if len(ports) != len(hosts):
        out.append(
            Finding(
                ERROR,
                'server.ports',
                ['vllm_server_host', 'vllm_server_port'],
                f'{len(hosts)} vllm_server_host value(s) but {len(ports)} vllm_server_port value(s): '
                f"ms-swift's VLLMClient needs one port per host (ValueError)",
                f'vllm_server_port: {[ports[0] if ports else 8000] * len(hosts)}',
                'swift/rlhf_trainers/vllm_client.py',
            )
        )
    group = cfg.vllm_server_group_port
    if group is not None and len(group) != len(hosts):
        out.append(
            Finding(
                ERROR,
                'server.ports',
                ['vllm_server_group_port'],
                f'{len(group)} vllm_server_group_port value(s) for {len(hosts)} host(s)',
                f'vllm_server_group_port: {[51216 + i for i in range(len(hosts))]}',
            )
        )
    for name, values in (('vllm_server_port', ports), ('vllm_server_group_port', group or [])):
        for v in values:
            if not 1 <= v <= 65535:
                out.append(
                    Finding(
                        ERROR, 'server.ports', [name], f'{name} {v} is not a TCP port (1..65535)', f'{name}: [8000]'
                    )
                )
    pairs = list(zip(hosts, ports))
    if len(set(pairs)) != len(pairs):
        out.append(
            Finding(
                ERROR,
                'server.ports',
                ['vllm_server_host', 'vllm_server_port'],
                'the same host:port is listed twice',
                'give each rollout server its own host:port',
            )
        )
    for i, h in enumerate(hosts):
        gp = group[i] if group and i < len(group) else 51216 + i
        if i < len(ports) and gp == ports[i]:
            out.append(
                Finding(
                    ERROR,
                    'server.ports',
                    ['vllm_server_group_port'],
                    f'the weight-sync group port {gp} equals the HTTP port of {h}',
                    f'vllm_server_group_port: [{gp + 1}]',
                )
            )
    return out


@rule('vllm.mode', 'vllm.off', 'vllm.utilization')
def vllm_mode_rules(ctx: Context) -> list[Finding]:
    """use_vllm and vllm_mode must agree (swift/arguments/rlhf_args.py ``_init_rollout``); vLLM's
    gpu_memory_utilization must be in (0, 1] (vllm/config/cache.py, pydantic)."""
    cfg = ctx.cfg
    src = 'swift/arguments/rlhf_args.py::_init_rollout'
    if cfg.use_vllm and cfg.vllm_mode is None:
        return [
            Finding(
                ERROR,
                'vllm.mode',
                ['vllm_mode'],
                'vllm_mode is required when use_vllm is true',
                'vllm_mode: colocate (or server, with `swift rollout` on its own GPUs)',
                src,
            )
        ]
    if not cfg.use_vllm and cfg.vllm_mode is not None:
        return [
            Finding(
                ERROR,
                'vllm.mode',
                ['vllm_mode', 'use_vllm'],
                'vllm_mode is not supported when use_vllm is false',
                'use_vllm: true',
                src,
            )
        ]
    out = []
    if not cfg.use_vllm and cfg.rlhf_type == 'grpo':
        out.append(
            Finding(
                INFO,
                'vllm.off',
                ['use_vllm'],
                'use_vllm is false: rollouts use HF generate, which is many times slower',
                'use_vllm: true with vllm_mode: colocate',
            )
        )
    u = cfg.vllm_gpu_memory_utilization
    if cfg.use_vllm and not 0 < u <= 1:
        out.append(
            Finding(
                ERROR,
                'vllm.utilization',
                ['vllm_gpu_memory_utilization'],
                f'gpu_memory_utilization Input should be less than or equal to 1 (got {u}) [vLLM]'
                if u > 1
                else f'vllm_gpu_memory_utilization must be > 0 (got {u})',
                'vllm_gpu_memory_utilization: 0.5',
            )
        )
    return out


@rule('vllm.colocate-only')
def colocate_only_options(ctx: Context) -> list[Finding]:
    """sleep_level / offload_model / offload_optimizer act only in colocate mode; ms-swift ignores
    them otherwise (swift/arguments/rlhf_args.py ``_init_grpo``)."""
    cfg = ctx.cfg
    if cfg.rollout_mode == 'colocate':
        return []
    active = [n for n in ('sleep_level', 'offload_model', 'offload_optimizer') if getattr(cfg, n)]
    return [
        Finding(
            WARNING,
            'vllm.colocate-only',
            [name],
            f'{name} only acts in colocate mode (vllm_mode {cfg.vllm_mode!r}, use_vllm {cfg.use_vllm}); '
            f'ms-swift ignores it here',
            f'remove {name}',
            'swift/arguments/rlhf_args.py::_init_grpo; docs GRPO.md',
        )
        for name in active
    ]


@rule('vllm.async-generate')
def async_generate_needs_server(ctx: Context) -> list[Finding]:
    """ms-swift raises "async generate require vllm_mode == server"
    (swift/arguments/rlhf_args.py ``_init_rollout``)."""
    cfg = ctx.cfg
    if cfg.async_generate and cfg.vllm_mode != 'server':
        return [
            Finding(
                ERROR,
                'vllm.async-generate',
                ['async_generate', 'vllm_mode'],
                'async generate require vllm_mode == server',
                'async_generate: false, or vllm_mode: server',
                'swift/arguments/rlhf_args.py::_init_rollout',
            )
        ]
    return []


@rule('vllm.ds3-gather')
def ds3_gather(ctx: Context) -> list[Finding]:
    """With vLLM the weights must be gathered to sync them: ds3_gather_for_generation false is refused
    (trl GRPOConfig ds3_gather_for_generation help; ms-swift's rollout weight sync)."""
    cfg = ctx.cfg
    if cfg.use_vllm and not cfg.ds3_gather_for_generation:
        return [
            Finding(
                ERROR,
                'vllm.ds3-gather',
                ['ds3_gather_for_generation'],
                'ds3_gather_for_generation false is not supported with vLLM: the weights cannot be synced '
                'to the rollout engine',
                'ds3_gather_for_generation: true (and move_model_batches: 8 to cap the ZeRO-3 gather peak)',
                'trl GRPOConfig docs; ms-swift.md §1.4',
            )
        ]
    return []


@rule('vllm.expandable-segments')
def expandable_segments_with_sleep(ctx: Context) -> list[Finding]:
    """PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True breaks vLLM sleep mode (cumem
    allocator) on older ms-swift/vLLM (ms-swift issue #6636). ms-swift 4.6 turns them off around creating and waking
    its colocated engine (swift/rlhf_trainers/utils.py ``set_expandable_segments``): no finding there. TRL has no such
    switch, and vLLM's CuMemAllocator asserts at start-up (vllm/device_allocator/cumem.py)."""
    cfg = ctx.cfg
    conf = ctx.environ.get('PYTORCH_CUDA_ALLOC_CONF', '') + ',' + ctx.launch.file_env.get('PYTORCH_CUDA_ALLOC_CONF', '')
    conf += ',' + (ctx.launch.alloc.values.get('PYTORCH_CUDA_ALLOC_CONF', '') if ctx.launch.alloc else '')  # exports
    toggle = ctx.launch.fw.expandable_toggle_from  # the release that turns them off around vLLM itself
    if (
        toggle is None
        and cfg.rollout_mode == 'colocate'
        and cfg.effective_sleep_level > 0
        and 'expandable_segments:True' in conf.replace(' ', '')
    ):
        # nothing in TRL turns them off around its engine; vLLM's CuMemAllocator asserts at start-up (allocconf.py)
        return [
            Finding(
                ERROR,
                'vllm.expandable-segments',
                ['PYTORCH_CUDA_ALLOC_CONF', 'vllm_enable_sleep_mode'],
                "Expandable segments are not compatible with memory pool (vLLM's sleep-mode allocator "
                'refuses PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True at start-up)',
                'drop expandable_segments:True from PYTORCH_CUDA_ALLOC_CONF, or vllm_enable_sleep_mode false',
                'vllm/device_allocator/cumem.py (CuMemAllocator.__init__); pytorch/pytorch#147851',
            )
        ]
    swift_v = version_tuple(ctx.packages.get('ms-swift'))
    if toggle is not None and swift_v is not None and swift_v[:2] >= toggle:
        return []  # set_expandable_segments keeps them away from the engine (see above)
    if cfg.use_vllm and cfg.effective_sleep_level > 0 and re.search(r'expandable_segments\s*:\s*True', conf):
        return [
            Finding(
                WARNING,
                'vllm.expandable-segments',
                ['PYTORCH_CUDA_ALLOC_CONF', 'sleep_level'],
                'PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True conflicts with vLLM sleep mode (cumem): '
                'sleep can free 0 GiB on older ms-swift/vLLM; current ms-swift toggles it off around vLLM',
                'upgrade to ms-swift >= 4.6 and a recent vLLM, or drop expandable_segments',
                'https://github.com/modelscope/ms-swift/issues/6636',
            )
        ]
    return []


@rule('quant.qlora-server')
def qlora_server(ctx: Context) -> list[Finding]:
    """bnb QLoRA weights cannot be loaded by a server-mode rollout (ms-swift issue #6884)."""
    cfg = ctx.cfg
    if cfg.quant_method == 'bnb' and cfg.rollout_mode == 'server':
        return [
            Finding(
                ERROR,
                'quant.qlora-server',
                ['quant_method', 'vllm_mode'],
                'bnb QLoRA with a server-mode rollout fails at weight loading (unsupported)',
                'vllm_mode: colocate (ms-swift sets vllm_quantization bitsandbytes), or a GPTQ/AWQ checkpoint',
                'https://github.com/modelscope/ms-swift/issues/6884',
            )
        ]
    return []


def _colocated_card(ctx: Context) -> tuple[str | None, tuple[int, int] | None]:
    """(the card, its compute capability) where the launch starts vLLM in its training processes on a catalogue card;
    the capability is None otherwise (no colocated engine, or a card whose capability is not known)."""
    from ..gpus import COMPUTE_CAPABILITY

    if not ctx.cfg.use_vllm or ctx.cfg.rollout_mode != 'colocate':
        return None, None
    card = ctx.hw.capacity()[0]
    return card, COMPUTE_CAPABILITY.get(card or '')


@rule('vllm.bf16-card')
def bf16_needs_ampere(ctx: Context) -> list[Finding]:
    """vLLM refuses bfloat16 on a card below compute capability 8.0 (V100 7.0, T4 7.5) when its engine starts
    ("Bfloat16 is only supported on GPUs with compute capability of at least 8.0", vllm/v1/worker/gpu_worker.py
    ``_check_if_gpu_supports_dtype``). A framework that hands vLLM the model's own dtype gives it bfloat16 for a
    bfloat16 model (``Framework.vllm_dtype_source``); one that passes none leaves vLLM's "auto", which falls back to
    float16 from vLLM 0.9.0 and stopped before it (``memory.vllm_engine.vllm_dtype``). Training itself runs there
    (torch emulates bfloat16)."""
    from ..memory.vllm_engine import vllm_dtype

    cfg, fw = ctx.cfg, ctx.launch.fw
    card, cc = _colocated_card(ctx)
    if cc is None:
        return []
    model_dtype = (ctx.model or {}).get('torch_dtype') or (ctx.model or {}).get('dtype')
    handed = (cfg.torch_dtype or model_dtype) if fw.vllm_dtype_source else None  # None: vLLM's "auto"
    version = ctx.packages.get('vllm')
    _, refusal, note = vllm_dtype(handed, model_dtype, card, version)
    if not refusal and not note:
        return []
    if fw.vllm_dtype_source:
        where = 'the model is bfloat16' if not cfg.torch_dtype else 'torch_dtype is bfloat16'
        return [
            Finding(
                ERROR,
                'vllm.bf16-card',
                ['torch_dtype'],
                f'vLLM stops when its engine starts: "Bfloat16 is only supported on GPUs with compute capability of '
                f'at least 8.0" ({card} is {cc[0]}.{cc[1]}); {where}, and it is the dtype handed to vLLM',
                'torch_dtype: float16',
                f'vllm/v1/worker/gpu_worker.py::_check_if_gpu_supports_dtype; {fw.vllm_dtype_source}',
            )
        ]
    if refusal:
        msg = (
            f'vLLM {version} stops when its engine starts: "Bfloat16 is only supported on GPUs with compute '
            f'capability of at least 8.0" ({card} is {cc[0]}.{cc[1]}): the trainer passes vLLM no dtype, and before '
            f'vLLM 0.9.0 "auto" keeps the bfloat16 checkpoint\'s dtype'
        )
    else:
        msg = f'the vLLM version is not known here: {note}'
    return [
        Finding(
            ERROR if refusal else WARNING,
            'vllm.bf16-card',
            ['vllm'],
            msg,
            'pip install "vllm>=0.9.0" (its "auto" dtype falls back to float16 on this card)',
            'vllm/config.py::_get_and_verify_dtype (vllm PR #17265, 0.9.0); '
            'vllm/v1/worker/gpu_worker.py::_check_if_gpu_supports_dtype',
        )
    ]


@rule('vllm.quant-card')
def quantization_needs_capability(ctx: Context) -> list[Finding]:
    """vLLM stops when it is configured on a card below the least compute capability of the checkpoint's
    quantization (an AWQ checkpoint on a V100: "The quantization method awq is not supported for the current GPU.
    Minimum capability: 75. Current capability: 70."; ``memory.vllm_engine.quantization_refusal``). The method is the
    one vLLM detects in the checkpoint's config.json, or the launch's ``vllm_quantization``."""
    from ..memory.vllm_engine import quantization_refusal

    cfg = ctx.cfg
    card, cc = _colocated_card(ctx)
    if cc is None:
        return []
    method = getattr(cfg, 'vllm_quantization', None) or ((ctx.model or {}).get('quantization_config') or {}).get(
        'quant_method'
    )
    refusal = quantization_refusal(method, card, ctx.packages.get('vllm'))
    if not refusal:
        return []
    return [
        Finding(
            ERROR,
            'vllm.quant-card',
            ['vllm'],
            f'vLLM stops when its engine starts on the {card} (compute capability {cc[0]}.{cc[1]}): "{refusal}"',
            'a GPU of that compute capability or newer, or a checkpoint in another format (a GPTQ one runs from 6.0)',
            'vllm/config/vllm.py::_get_quantization_config (QuantizationConfig.get_min_capability)',
        )
    ]
