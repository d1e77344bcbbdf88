"""The guard's rules: one pure function per rule, over one :class:`Context`.

Each rule returns :class:`Finding` objects; each finding names the argument(s), the rule id, the
message and the fix as the exact YAML/CLI change. Where ms-swift, vLLM or DeepSpeed have their
own check, the message quotes their wording (and the source file), so what the guard says before
launch is what the framework would say minutes later. To find the rule behind a message, search
this file for the rule id printed next to it.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Callable

from .config import GRPOConfig
from .hardware import Hardware
from .launch import Launch
from .plan import Plan
from . import swift_args

ERROR, WARNING, INFO = 'error', 'warning', 'info'
SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}


@dataclass
class Finding:
    severity: str
    rule: str
    arguments: list[str]
    message: str
    fix: str | None = None
    source: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Context:
    """Everything a rule may look at. Built at the edge (CLI); rules never do I/O."""
    cfg: GRPOConfig
    launch: Launch
    plan: Plan
    hw: Hardware
    model: dict | None = None
    """The model's config.json (None: unavailable; rules that need it are skipped)."""
    remaining: list[str] = field(default_factory=list)
    """Strings ms-swift's parser would not recognise."""
    packages: dict[str, str | None] = field(default_factory=dict)
    """Installed versions by distribution name (None: not installed)."""
    dataset_columns: dict[str, list[str] | None] = field(default_factory=dict)
    """Columns of the first row of each local dataset file (None: not readable here)."""
    environ: dict[str, str] = field(default_factory=dict)
    """Other environment variables that matter (PYTORCH_CUDA_ALLOC_CONF)."""
    data_stats: dict | None = None
    """``grpo-data stats --json`` of the training data (``--data-stats``), for data-aware planning."""


Rule = Callable[[Context], list[Finding]]
RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


def version_tuple(v) -> tuple[int, ...] | None:
    """The first three numbers of a version string ("0.10.1.1 (V1 engine)" -> (0, 10, 1)); None if none."""
    if v is None or v == '':
        return None
    parts = re.findall(r'\d+', str(v))[:3]
    return tuple(int(p) for p in parts) if parts else None


def _model_max_len(model: dict | None) -> int | None:
    if not model:
        return None
    mpe = model.get('max_position_embeddings')
    if not isinstance(mpe, int):
        return None
    rope = model.get('rope_scaling') or {}
    factor = rope.get('factor') if isinstance(rope, dict) else None
    if isinstance(factor, (int, float)) and factor > 1 and rope.get('type', rope.get('rope_type')) in ('yarn',
                                                                                                      'dynamic'):
        return int(mpe * factor)
    return mpe


def _ids(ids) -> str:
    return ','.join(str(i) for i in ids)


# --------------------------------------------------------------------------------------------
# Arguments ms-swift would not accept at all
# --------------------------------------------------------------------------------------------

@rule
def unknown_arguments(ctx: Context) -> list[Finding]:
    if ctx.launch.framework == 'trl':
        from .frontends.trl import CLASSES, describe_unknown
        out = []
        for flag in ctx.remaining:
            msg, fatal = describe_unknown(flag, CLASSES, ctx.packages.get('trl'))
            if not msg:
                continue
            out.append(Finding(ERROR if fatal else WARNING, 'args.unknown', [flag.lstrip('-')],
                               msg + ('. TrlParser stops with "Some specified arguments are not used by the '
                                      'HfArgumentParser"' if fatal else ''),
                               f'remove {flag}' if fatal else None, 'trl/scripts/utils.py (TrlParser)'))
        return out
    out = []
    for u in swift_args.explain_remaining(ctx.remaining):
        fix = f'rename {u.flag} to {u.suggestion}' if u.suggestion else f'remove {u.flag}'
        out.append(Finding(ERROR, 'args.unknown', [u.flag.lstrip('-')],
                           f'{u.describe()}. ms-swift stops with `ValueError: remaining_argv: [...]`',
                           fix, 'swift/pipelines/base.py'))
    return out


@rule
def rlhf_type_is_grpo(ctx: Context) -> list[Finding]:
    if ctx.cfg.rlhf_type != 'grpo':
        return [Finding(ERROR, 'args.rlhf-type', ['rlhf_type'],
                        f'rlhf_type is {ctx.cfg.rlhf_type!r}; this guard checks GRPO launches '
                        f'(ms-swift\'s default rlhf_type is dpo)', 'rlhf_type: grpo')]
    return []


# --------------------------------------------------------------------------------------------
# Devices and processes
# --------------------------------------------------------------------------------------------

@rule
def visible_gpus_match_nproc(ctx: Context) -> list[Finding]:
    """ms-swift enters device_map (model-parallel) mode when a process sees >= 2 GPUs
    (swift/utils/env.py::is_mp: n_gpu // local_world_size >= 2)."""
    p, cfg = ctx.plan, ctx.cfg
    if p.visible_count is None or p.visible_count == 0:
        return []
    vis = p.visible_gpus or []
    if ctx.launch.framework == 'trl':
        return _trl_devices(ctx, vis)
    if p.nproc_per_node is None and p.nnodes == 1:
        if p.visible_count < 2:
            return []
        sev = ERROR if cfg.use_vllm else WARNING
        msg = (f'{p.visible_count} GPUs are visible ({_ids(vis)}) but NPROC_PER_NODE is unset: ms-swift starts one '
               f'process that wraps the model across all of them (device_map), and memory grows on every GPU')
        if cfg.use_vllm:
            msg += ('. With vLLM it stops with "GRPO with vLLM is not compatible with device_map. Please set '
                    'NPROC_PER_NODE equal to num_processes."')
        return [Finding(sev, 'device.single-process-multi-gpu', ['NPROC_PER_NODE', 'CUDA_VISIBLE_DEVICES'], msg,
                        f'ENV: {{NPROC_PER_NODE: {p.visible_count}}}, or CUDA_VISIBLE_DEVICES={vis[0]} '
                        f'for a single training GPU', 'swift/arguments/rlhf_args.py::_check_grpo; ms-swift #5592')]
    nproc = p.nproc_per_node
    if nproc is None or nproc <= 0:
        return []
    if p.visible_count == nproc:
        return []
    if p.visible_count < nproc:
        return [Finding(ERROR, 'device.nproc-exceeds-visible', ['NPROC_PER_NODE', 'CUDA_VISIBLE_DEVICES'],
                        f'NPROC_PER_NODE={nproc} but only {p.visible_count} GPU(s) are visible ({_ids(vis)}): '
                        f'torchrun starts {nproc} processes and the extra ones have no GPU',
                        f'ENV: {{NPROC_PER_NODE: {p.visible_count}}}')]
    mode = 'server' if cfg.vllm_mode == 'server' else None
    fix_ids = _ids(vis[:nproc])
    msg = (f'{p.visible_count} GPUs are visible ({_ids(vis)}) to {nproc} process(es) per node: ms-swift sees '
           f'{p.visible_count // nproc if p.visible_count % nproc == 0 else "an uneven number of"} GPUs per process '
           f'and enters device_map mode')
    if p.visible_count % nproc:
        msg += f' (its own assert fails first: "n_gpu: {p.visible_count}, local_world_size: {nproc}")'
    if mode == 'server':
        msg += '; in server mode hide the rollout GPUs from the trainer'
    return [Finding(ERROR, 'device.visible-vs-nproc', ['CUDA_VISIBLE_DEVICES', 'NPROC_PER_NODE'], msg,
                    f'ENV: {{CUDA_VISIBLE_DEVICES: "{fix_ids}", NPROC_PER_NODE: {nproc}}} '
                    f'or NPROC_PER_NODE: {p.visible_count}', 'swift/utils/env.py::is_mp')]


def _trl_devices(ctx: Context, vis: list[int]) -> list[Finding]:
    """TRL: one plain process seeing several GPUs is wrapped in DataParallel by the HF Trainer; accelerate
    gives process i the GPU cuda:i of those it sees (extra visible GPUs stay idle, no device_map)."""
    p, cfg = ctx.plan, ctx.cfg
    launcher = ctx.launch.trl.get('launcher')
    # One process without a distributed launcher (python, or accelerate/trl grpo with one process: accelerate's
    # simple launcher sets no LOCAL_RANK) is DistributedType.NO, where TrainingArguments sets n_gpu to every
    # visible GPU (transformers/training_args.py _setup_devices); torchrun/deepspeed make even one process
    # distributed, with one GPU.
    acc = ctx.launch.trl.get('accelerate') or {}
    distributed = launcher in ('torchrun', 'deepspeed') or acc.get('zero_stage') is not None or acc.get('fsdp')
    single = p.processes_per_node == 1 and p.nnodes == 1 and not distributed
    if single:
        if p.visible_count < 2:
            return []
        msg = (f'`{ctx.launch.trl.get("display") or launcher}` is one process that sees {p.visible_count} GPUs '
               f'({_ids(vis)}): the HF Trainer wraps the model in nn.DataParallel ("if self.args.n_gpu > 1: model = '
               f'nn.DataParallel(model)", transformers/trainer.py _wrap_model), so forward and log-prob passes '
               f'replicate onto every visible GPU')
        if cfg.use_vllm:
            msg += ', including the one meant for vLLM, whose memory then grows until CUDA OOM'
        return [Finding(ERROR if cfg.use_vllm else WARNING, 'device.data-parallel', ['CUDA_VISIBLE_DEVICES'], msg,
                        f'CUDA_VISIBLE_DEVICES={vis[0]} {ctx.launch.trl.get("prefix") or launcher} ... for one '
                        f'training GPU (and the vLLM server on '
                        f'another: CUDA_VISIBLE_DEVICES={vis[-1]} trl vllm-serve ...), or accelerate launch '
                        f'--multi_gpu --num_processes {p.visible_count} ...',
                        'transformers/trainer.py::_wrap_model; transformers/training_args.py::_setup_devices')]
    if p.visible_count < p.processes_per_node:
        gids = ctx.launch.trl.get('gpu_ids')
        return [Finding(ERROR, 'device.nproc-exceeds-visible', ['num_processes', 'gpu_ids'],
                        f'accelerate starts {p.processes_per_node} process(es) per node but only {p.visible_count} '
                        f'GPU(s) are visible ({_ids(vis)}{", from --gpu_ids" if gids else ""}): the extra processes '
                        f'have no GPU', f'--num_processes {p.visible_count}, or --gpu_ids with '
                        f'{p.processes_per_node} ids', 'accelerate/utils/launch.py::prepare_multi_gpu_env')]
    return []


@rule
def trl_ds3_gather_whole_model(ctx: Context) -> list[Finding]:
    """TRL under ZeRO-3 gathers the whole model on every GPU for generation (unwrap_model_for_generation
    with ds3_gather_for_generation), and with PEFT for the vLLM weight sync too (it merges the adapter)."""
    cfg = ctx.cfg
    if ctx.launch.framework != 'trl' or cfg.zero_stage != 3 or not ctx.model:
        return []
    from .arch import Arch
    from .gpus import lookup
    found = lookup(ctx.hw.gpu_type)
    cap = ctx.hw.gpu_mem_gib or (found[1] if found else None)
    try:
        whole = Arch.from_config(ctx.model).weight_bytes() / 2 ** 30
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return []
    gathers = (not cfg.use_vllm and cfg.ds3_gather_for_generation) or (cfg.use_vllm and cfg.is_lora)
    if not cap or not gathers or whole < 0.9 * cap:
        return []
    why = ('generation gathers every ZeRO-3 shard (unwrap_model_for_generation, ds3_gather_for_generation true)'
           if not cfg.use_vllm else 'the vLLM weight sync gathers the whole model to merge the LoRA adapter')
    return [Finding(ERROR, 'trl.ds3-gather', ['ds3_gather_for_generation'],
                    f'{why}: {whole:.1f} GiB of weights on each {cap:.1f} GiB GPU',
                    '--ds3_gather_for_generation false (HF generate only; slower), or --use_vllm --vllm_mode '
                    'server without PEFT, or larger GPUs', 'trl/models/utils.py::unwrap_model_for_generation; '
                    'trl GRPOConfig ds3_gather_for_generation')]


@rule
def visible_gpus_exist(ctx: Context) -> list[Finding]:
    p, hw = ctx.plan, ctx.hw
    out = []
    raw = ctx.launch.env.get('CUDA_VISIBLE_DEVICES')
    if raw is not None and raw.strip() and p.visible_gpus is None:
        return [Finding(ERROR, 'device.bad-ids', ['CUDA_VISIBLE_DEVICES'],
                        f'CUDA_VISIBLE_DEVICES={raw!r} is not a comma-separated list of GPU ids',
                        'CUDA_VISIBLE_DEVICES: "0,1"')]
    if raw is not None and raw.strip() == '' and ctx.cfg.use_vllm:
        out.append(Finding(ERROR, 'device.none-visible', ['CUDA_VISIBLE_DEVICES'],
                           'CUDA_VISIBLE_DEVICES is empty: training would run on CPU and vLLM cannot start',
                           'CUDA_VISIBLE_DEVICES: "0"'))
    vis = p.visible_gpus or []
    if len(set(vis)) != len(vis):
        out.append(Finding(ERROR, 'device.duplicate-ids', ['CUDA_VISIBLE_DEVICES'],
                           f'CUDA_VISIBLE_DEVICES={raw} lists a GPU twice', f'CUDA_VISIBLE_DEVICES: '
                           f'"{_ids(sorted(set(vis)))}"'))
    if hw.gpus is not None and raw is not None:
        missing = [i for i in vis if i >= hw.gpus]
        if missing:
            out.append(Finding(ERROR, 'device.missing', ['CUDA_VISIBLE_DEVICES'],
                               f'GPU(s) {_ids(missing)} do not exist: this node has {hw.gpus} GPU(s) '
                               f'(ids 0..{hw.gpus - 1}, from {hw.source})',
                               f'CUDA_VISIBLE_DEVICES: "{_ids(range(min(len(vis), hw.gpus)))}"'))
    return out


@rule
def rollout_gpus(ctx: Context) -> list[Finding]:
    """Server mode: `swift rollout` runs on its own GPUs (its own CUDA_VISIBLE_DEVICES)."""
    cfg, p, hw = ctx.cfg, ctx.plan, ctx.hw
    if ctx.launch.trl.get('vllm_device_gpu') is not None:
        return []  # TRL 0.14-0.15's in-trainer vLLM: trl.vllm-device checks its GPU as TRL did
    if not (cfg.use_vllm and cfg.vllm_mode == 'server'):
        if p.rollout_gpus:
            return [Finding(WARNING, 'device.rollout-gpus-unused', ['--rollout-gpus'],
                            f'--rollout-gpus {_ids(p.rollout_gpus)} given, but vllm_mode is {cfg.vllm_mode!r}: '
                            f'no rollout server runs', 'drop --rollout-gpus, or vllm_mode: server')]
        return []
    if p.rollout_gpus is None:
        return [Finding(INFO, 'device.rollout-gpus-unknown', ['--rollout-gpus'],
                        'server mode: the rollout server\'s GPUs are not known, so overlap and count are not '
                        'checked', 'pass --rollout-gpus IDS (the CUDA_VISIBLE_DEVICES of `swift rollout`)')]
    out = []
    need = max(1, cfg.vllm_tensor_parallel_size) * max(1, cfg.vllm_data_parallel_size)
    have = len(p.rollout_gpus)
    train = set(p.visible_gpus or [])
    if ctx.launch.framework == 'trl' and ctx.launch.trl.get('launcher') != 'python':
        train = set((p.visible_gpus or [])[:p.processes_per_node])  # accelerate/torchrun: process i on cuda:i
    overlap = sorted(train & set(p.rollout_gpus))
    here = p.nnodes == 1 and not p.rollout_remote  # the server shares this node's GPUs
    if overlap and here:
        out.append(Finding(ERROR, 'device.rollout-overlap', ['CUDA_VISIBLE_DEVICES', '--rollout-gpus'],
                           f'GPU(s) {_ids(overlap)} are given to both training ({_ids(p.visible_gpus or [])}) and '
                           f'the rollout server ({_ids(p.rollout_gpus)}): vLLM reserves '
                           f'{cfg.vllm_gpu_memory_utilization:.0%} of them and training OOMs',
                           f'CUDA_VISIBLE_DEVICES: "{_ids(sorted(train - set(overlap)))}" for training, '
                           f'and ROLLOUT_GPUS / --rollout-gpus on GPUs not in it'))
    if have < need:
        out.append(Finding(ERROR, 'device.rollout-count', ['vllm_tensor_parallel_size', 'vllm_data_parallel_size',
                                                            '--rollout-gpus'],
                           f'Error: local_device_count ({have}) must be greater than or equal to the product of '
                           f'vllm_data_parallel_size ({cfg.vllm_data_parallel_size}) and vllm_tensor_parallel_size '
                           f'({cfg.vllm_tensor_parallel_size}) ({need}) [swift rollout]',
                           f'give the rollout server {need} GPU(s), or vllm_tensor_parallel_size: '
                           f'{max(1, have // max(1, cfg.vllm_data_parallel_size))}',
                           'swift/arguments/deploy_args.py::RolloutArguments'))
    elif have > need:
        out.append(Finding(WARNING, 'device.rollout-count', ['--rollout-gpus'],
                           f'the rollout server gets {have} GPUs but uses only dp×tp = {need}; the rest idle',
                           f'--rollout-gpus {_ids(p.rollout_gpus[:need])}'))
    if ctx.hw.gpus is not None and here:
        used = train | set(p.rollout_gpus)
        if len(used) > hw.gpus or any(i >= hw.gpus for i in used):
            out.append(Finding(ERROR, 'device.total', ['CUDA_VISIBLE_DEVICES', '--rollout-gpus'],
                               f'training ({len(train)}) plus rollout ({have}) GPUs need ids {_ids(sorted(used))}, '
                               f'but this node has {hw.gpus} GPU(s) (ids 0..{hw.gpus - 1}): "The requested device '
                               f'for vllm is not available"',
                               'use fewer training processes (NPROC_PER_NODE and CUDA_VISIBLE_DEVICES) or a '
                               'smaller vllm_tensor_parallel_size'))
    return out


@rule
def rollout_server_arguments(ctx: Context) -> list[Finding]:
    """Server mode with the rollout command known: the server's own start-up checks (its GPU count and
    overlap are the device rules' business)."""
    r = ctx.launch.rollout
    if r is None or not (ctx.cfg.use_vllm and ctx.cfg.vllm_mode == 'server'):
        return []
    from .rollout_check import rollout_findings
    return [f for f in rollout_findings(r, ctx.hw, ctx.model, as_error=False)
            if f.rule not in ('rollout.gpu-count', 'rollout.gpu-missing')]


@rule
def colocate_tp_divides_world(ctx: Context) -> list[Finding]:
    cfg, p = ctx.cfg, ctx.plan
    tp = cfg.vllm_tensor_parallel_size
    if not (cfg.use_vllm and cfg.vllm_mode == 'colocate') or tp <= 0:
        return []
    if p.world_size % tp:
        valid = [t for t in range(1, p.world_size + 1) if p.world_size % t == 0]
        return [Finding(ERROR, 'vllm.colocate-tp', ['vllm_tensor_parallel_size', 'NPROC_PER_NODE'],
                        f'vllm_tensor_parallel_size ({tp}) must divide world size ({p.world_size}) evenly.',
                        f'vllm_tensor_parallel_size: one of {valid}',
                        'swift/rlhf_trainers/rollout_mixin.py')]
    return []


@rule
def tp_divides_heads(ctx: Context) -> list[Finding]:
    cfg = ctx.cfg
    heads = (ctx.model or {}).get('num_attention_heads')
    tp = cfg.vllm_tensor_parallel_size
    if not cfg.use_vllm or not isinstance(heads, int) or tp <= 0 or heads % tp == 0:
        return []
    valid = [t for t in range(1, heads + 1) if heads % t == 0 and t <= 16]
    return [Finding(ERROR, 'vllm.tp-heads', ['vllm_tensor_parallel_size'],
                    f'Total number of attention heads ({heads}) must be divisible by tensor parallel size ({tp}). '
                    f'[vLLM, at engine start]', f'vllm_tensor_parallel_size: one of {valid}',
                    'vllm/config/model.py (verify_with_parallel_config)')]


@rule
def tp_positive(ctx: Context) -> list[Finding]:
    cfg = ctx.cfg
    bad = [n for n in ('vllm_tensor_parallel_size', 'vllm_data_parallel_size') if getattr(cfg, n) < 1]
    return [Finding(ERROR, 'vllm.parallel-size', [n], f'{n} must be >= 1 (got {getattr(cfg, n)})', f'{n}: 1')
            for n in bad]


@rule
def multi_node_env(ctx: Context) -> list[Finding]:
    env, p = ctx.launch.env, ctx.plan
    out = []
    for key in ('NNODES', 'NODE_RANK', 'NPROC_PER_NODE', 'MASTER_PORT'):
        raw = env.get(key)
        if raw is not None and not raw.strip().isdigit():
            out.append(Finding(ERROR, 'launch.env-int', [key], f'{key}={raw!r} must be a non-negative integer',
                               f'ENV: {{{key}: <integer>}}'))
    if out:
        return out
    if 'NNODES' in env and int(env['NNODES']) < 1:
        out.append(Finding(ERROR, 'launch.multi-node', ['NNODES'], 'NNODES must be >= 1', 'ENV: {NNODES: 1}'))
    if 'NPROC_PER_NODE' in env and int(env['NPROC_PER_NODE']) < 1:
        out.append(Finding(ERROR, 'launch.nproc', ['NPROC_PER_NODE'], 'NPROC_PER_NODE must be >= 1',
                           'ENV: {NPROC_PER_NODE: 1}'))
    if p.nnodes > 1:
        missing = [k for k in ('NODE_RANK', 'MASTER_ADDR') if not env.get(k)]
        if missing:
            out.append(Finding(ERROR, 'launch.multi-node', missing,
                               f'NNODES={p.nnodes} but {" and ".join(missing)} unset: torchrun cannot form the group '
                               f'(each node needs its own NODE_RANK and the same MASTER_ADDR)',
                               'export NODE_RANK=<0..NNODES-1> MASTER_ADDR=<ip of node 0> on every node'))
        if p.node_rank is not None and p.node_rank >= p.nnodes:
            out.append(Finding(ERROR, 'launch.multi-node', ['NODE_RANK', 'NNODES'],
                               f'NODE_RANK={p.node_rank} must be below NNODES={p.nnodes}',
                               f'NODE_RANK: one of 0..{p.nnodes - 1}'))
        if p.nproc_per_node is None:
            out.append(Finding(ERROR, 'launch.multi-node', ['NPROC_PER_NODE'],
                               f'NNODES={p.nnodes} without NPROC_PER_NODE: torchrun starts 1 process per node',
                               'ENV: {NPROC_PER_NODE: <GPUs per node>}'))
    elif p.node_rank not in (None, 0):
        out.append(Finding(ERROR, 'launch.multi-node', ['NODE_RANK', 'NNODES'],
                           f'NODE_RANK={p.node_rank} on a single-node launch (NNODES unset or 1)',
                           'set NNODES to the number of nodes, or drop NODE_RANK'))
    return out


_HOST_RE = re.compile(r'^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9\-\.]*[A-Za-z0-9])?$|^\[?[0-9a-fA-F:]+\]?$')


@rule
def trl_old_vllm_device(ctx: Context) -> list[Finding]:
    """TRL 0.14-0.15 started vLLM inside the trainer on ``vllm_device`` and checked it the way quoted here
    (trl v0.15 trl/trainer/grpo_trainer.py, GRPOTrainer.__init__)."""
    idx = ctx.launch.trl.get('vllm_device_index')
    if idx is None:
        return []
    p = ctx.plan
    count = p.visible_count
    nproc = p.processes_per_node * max(1, p.nnodes)
    src = 'trl v0.15 trl/trainer/grpo_trainer.py (GRPOTrainer.__init__)'
    if count is not None and idx >= count:
        return [Finding(ERROR, 'trl.vllm-device', ['vllm_device', 'NPROC_PER_NODE'],
                        f'The requested device for vllm (cuda:{idx}) is not available. You are likely using vLLM '
                        f'without restricting the number of GPUs for training. [{count} GPU(s) visible, {nproc} '
                        f'training process(es)]',
                        f'ENV: {{NPROC_PER_NODE: {max(1, count - 1)}}} (one visible GPU left for vLLM), or upgrade '
                        f'TRL and run vLLM as a server: --vllm_mode server with `trl vllm-serve` on its own GPU', src)]
    if idx < nproc and count != 1:
        return [Finding(WARNING, 'trl.vllm-device', ['vllm_device'],
                        f'The requested device cuda:{idx} is also being used for training: vLLM reserves '
                        f'{ctx.cfg.vllm_gpu_memory_utilization:.0%} of it beside a training process',
                        f'ENV: {{NPROC_PER_NODE: {max(1, nproc)}}} with one more visible GPU, and --vllm_device '
                        f'cuda:{nproc}', src)]
    return []


@rule
def server_endpoints(ctx: Context) -> list[Finding]:
    cfg = ctx.cfg
    if not cfg.use_vllm or cfg.vllm_mode != 'server' or ctx.launch.trl.get('vllm_device_gpu') is not None:
        return []
    out = []
    if not cfg.vllm_server_host and not cfg.vllm_server_base_url:
        return [Finding(ERROR, 'server.host', ['vllm_server_host'],
                        'vllm_mode server needs vllm_server_host (or vllm_server_base_url); ms-swift fails with a '
                        'bare AssertionError', 'vllm_server_host: [127.0.0.1]', 'swift/arguments/rlhf_args.py')]
    if cfg.vllm_server_base_url:
        for url in cfg.vllm_server_base_url:
            if not re.match(r'^https?://[^/\s:]+(:\d{1,5})?(/.*)?$', url):
                out.append(Finding(ERROR, 'server.url', ['vllm_server_base_url'],
                                   f'vllm_server_base_url {url!r} is not an http(s)://host[:port] URL',
                                   'vllm_server_base_url: [http://127.0.0.1:8000]'))
        return out
    hosts = cfg.vllm_server_host or []
    for h in hosts:
        if not _HOST_RE.match(h):
            out.append(Finding(ERROR, 'server.host', ['vllm_server_host'], f'vllm_server_host {h!r} is not a '
                               'hostname or IP address', 'vllm_server_host: [127.0.0.1]'))
    ports = cfg.vllm_server_port or []
    if len(ports) != len(hosts):
        out.append(Finding(ERROR, 'server.ports', ['vllm_server_host', 'vllm_server_port'],
                           f'{len(hosts)} vllm_server_host value(s) but {len(ports)} vllm_server_port value(s): '
                           f'ms-swift\'s VLLMClient needs one port per host (ValueError)',
                           f'vllm_server_port: {[ports[0] if ports else 8000] * len(hosts)}',
                           'swift/rlhf_trainers/vllm_client.py'))
    group = cfg.vllm_server_group_port
    if group is not None and len(group) != len(hosts):
        out.append(Finding(ERROR, 'server.ports', ['vllm_server_group_port'],
                           f'{len(group)} vllm_server_group_port value(s) for {len(hosts)} host(s)',
                           f'vllm_server_group_port: {[51216 + i for i in range(len(hosts))]}'))
    for name, values in (('vllm_server_port', ports), ('vllm_server_group_port', group or [])):
        for v in values:
            if not 1 <= v <= 65535:
                out.append(Finding(ERROR, 'server.ports', [name], f'{name} {v} is not a TCP port (1..65535)',
                                   f'{name}: [8000]'))
    pairs = list(zip(hosts, ports))
    if len(set(pairs)) != len(pairs):
        out.append(Finding(ERROR, 'server.ports', ['vllm_server_host', 'vllm_server_port'],
                           'the same host:port is listed twice', 'give each rollout server its own host:port'))
    for i, h in enumerate(hosts):
        gp = group[i] if group and i < len(group) else 51216 + i
        if i < len(ports) and gp == ports[i]:
            out.append(Finding(ERROR, 'server.ports', ['vllm_server_group_port'],
                               f'the weight-sync group port {gp} equals the HTTP port of {h}',
                               f'vllm_server_group_port: [{gp + 1}]'))
    return out


# --------------------------------------------------------------------------------------------
# Batch arithmetic (ms-swift 4.6 swift/rlhf_trainers/args_mixin.py::_init_generation_batch_params)
# --------------------------------------------------------------------------------------------

@rule
def batch_rules(ctx: Context) -> list[Finding]:
    cfg, p = ctx.cfg, ctx.plan
    trl = ctx.launch.framework == 'trl'
    src = ('trl/trainer/grpo_config.py::GRPOConfig.__post_init__' if trl else
           'swift/rlhf_trainers/args_mixin.py::_init_generation_batch_params')
    world = p.world_size
    bs = cfg.per_device_train_batch_size
    out = []
    if bs < 1:
        return [Finding(ERROR, 'batch.per-device', ['per_device_train_batch_size'],
                        f'per_device_train_batch_size must be >= 1 (got {bs})', 'per_device_train_batch_size: 1')]
    if (cfg.gradient_accumulation_steps or 1) < 1:
        return [Finding(ERROR, 'batch.accumulation', ['gradient_accumulation_steps'],
                        'gradient_accumulation_steps must be >= 1', 'gradient_accumulation_steps: 1')]
    G = cfg.num_generations
    if G <= 1 and cfg.rlhf_type == 'grpo':
        out.append(Finding(ERROR, 'batch.num-generations', ['num_generations'],
                           'GRPO requires at least 2 generations per prompt to calculate the advantages. You provided '
                           f'{G}, which is less than the minimum required.' if trl else
                           'num_generations must be greater than 1 for GRPO', 'num_generations: 8',
                           src if trl else 'swift/arguments/rlhf_args.py::_check_teacher'))
    global_bs = bs * world
    gbs, spg = cfg.generation_batch_size, cfg.steps_per_generation
    if gbs is not None and spg is None and gbs % global_bs:
        out.append(Finding(ERROR, 'batch.generation-batch', ['generation_batch_size', 'per_device_train_batch_size'],
                           f'generation_batch_size ({gbs}) must be divisible by the global batch size ({global_bs}).',
                           f'generation_batch_size: {max(1, round(gbs / global_bs)) * global_bs} '
                           f'(a multiple of per_device_train_batch_size × world = {global_bs})', src))
        return out
    if trl and gbs is not None and spg is not None:
        out.append(Finding(ERROR, 'batch.generation-batch', ['generation_batch_size', 'steps_per_generation'],
                           "'generation_batch_size' and 'steps_per_generation' can not be both configured at the "
                           "same time", 'set only one of generation_batch_size and steps_per_generation', src))
        return out
    if gbs is not None and spg is not None and gbs != global_bs * spg:
        out.append(Finding(ERROR, 'batch.generation-batch', ['generation_batch_size', 'steps_per_generation'],
                           f'generation_batch_size ({gbs}) must equal per_device_train_batch_size * world_size * '
                           f'steps_per_generation = {global_bs * spg}.',
                           'set only one of generation_batch_size and steps_per_generation', src))
        return out
    if p.steps_per_generation is not None and p.steps_per_generation <= 0:
        out.append(Finding(ERROR, 'batch.steps-per-generation', ['steps_per_generation'],
                           f'steps_per_generation must be > 0, got {p.steps_per_generation}.',
                           'steps_per_generation: 1', src))
        return out
    gen = p.generation_batch
    if G > 1 and gen is not None and gen % G:
        valid = [n for n in range(2, gen + 1) if gen % n == 0]
        fix_bs = next((b for b in range(bs, bs * G + 1) if (b * world * p.steps_per_generation) % G == 0), None)
        fix = f'num_generations: one of {valid}'
        if fix_bs:
            fix += f', or per_device_train_batch_size: {fix_bs}'
        out.append(Finding(ERROR, 'batch.num-generations-divides', ['num_generations', 'per_device_train_batch_size',
                                                                     'gradient_accumulation_steps'],
                           (f'generation_batch_size ({gen}) must be divisible by num_generations ({G}). (valid: '
                            f'{valid})' if trl else
                            f'generation_batch_size ({gen}) must be evenly divisible by num_generations ({G}). '
                            f'Valid values: {valid}.'), fix, src))
    if G > 1 and cfg.eval_strategy not in (None, 'no'):
        Ge = cfg.num_generations_eval or G
        geb = cfg.per_device_eval_batch_size * world
        if geb % Ge:
            valid = [n for n in range(1, geb + 1) if geb % n == 0]
            out.append(Finding(ERROR, 'batch.eval', ['per_device_eval_batch_size', 'num_generations_eval'],
                               f'The global eval batch size ({world} x {cfg.per_device_eval_batch_size}) must be '
                               f'evenly divisible by num_generations_eval ({Ge}). Valid values: {valid}.',
                               f'per_device_eval_batch_size: {Ge}, or num_generations_eval: one of {valid}', src))
    return out


@rule
def batch_shape_warnings(ctx: Context) -> list[Finding]:
    cfg, p = ctx.cfg, ctx.plan
    G = cfg.num_generations
    if G <= 1 or cfg.per_device_train_batch_size < 1 or not p.steps_per_generation or p.steps_per_generation <= 0:
        return []
    out = []
    ga = cfg.gradient_accumulation_steps or 1
    spg = p.steps_per_generation
    if cfg.num_iterations <= 1 and spg == ga and cfg.is_set('epsilon'):
        out.append(Finding(INFO, 'batch.clipping-inert', ['epsilon', 'steps_per_generation', 'num_iterations'],
                           f'steps_per_generation == gradient_accumulation_steps ({ga}) and num_iterations 1: every '
                           f'update is on-policy, the importance ratio is 1 and epsilon={cfg.epsilon} never clips',
                           'steps_per_generation: a multiple of gradient_accumulation_steps, or num_iterations: 2, '
                           'if clipping is wanted', 'docs GRPO.md FAQ; swift/rlhf_trainers/grpo_trainer.py'))
    elif spg != ga and spg % ga and ga % spg:
        out.append(Finding(WARNING, 'batch.rollout-misaligned', ['steps_per_generation',
                                                                 'gradient_accumulation_steps'],
                           f'steps_per_generation ({spg}) and gradient_accumulation_steps ({ga}) are not multiples: '
                           f'rollouts and optimizer steps drift apart, so some steps mix two rollouts and clipping '
                           f'acts unevenly', f'steps_per_generation: {ga} (or a multiple of it)'))
    return out


# --------------------------------------------------------------------------------------------
# Lengths
# --------------------------------------------------------------------------------------------

def kv_bytes_per_token(model: dict) -> int | None:
    """KV cache bytes per token of a config.json (see Arch.kv_bytes_per_token), None if unreadable."""
    from .arch import Arch
    try:
        return Arch.from_config(model).kv_bytes_per_token()
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


@rule
def length_rules(ctx: Context) -> list[Finding]:
    cfg = ctx.cfg
    out = []
    model_max = _model_max_len(ctx.model)
    if cfg.truncation_strategy not in ('left', 'delete'):
        out.append(Finding(ERROR, 'length.truncation', ['truncation_strategy'],
                           f"GRPO requires `truncation_strategy 'left' or 'delete'`, Current value: "
                           f"`truncation_strategy='{cfg.truncation_strategy}'`.", 'truncation_strategy: delete '
                           '(after filtering the data with grpo-data filter) or left',
                           'swift/arguments/rlhf_args.py::_init_grpo'))
    if cfg.max_completion_length is not None and cfg.max_completion_length < 1:
        out.append(Finding(ERROR, 'length.completion', ['max_completion_length'],
                           'max_completion_length must be >= 1', 'max_completion_length: 1024'))
        return out
    vllm_len = cfg.vllm_max_model_len
    if cfg.use_vllm and vllm_len is not None and model_max is not None and vllm_len > model_max:
        out.append(Finding(ERROR, 'length.vllm-exceeds-model', ['vllm_max_model_len'],
                           f'User-specified max_model_len ({vllm_len}) is greater than the derived max_model_len '
                           f'(max_position_embeddings={model_max} in model\'s config.json) [vLLM, at engine start]',
                           f'vllm_max_model_len: {model_max} or less', 'vllm/config/model.py'))
    if cfg.use_vllm and cfg.vllm_mode == 'colocate' and vllm_len is None:
        msg = f'{ctx.launch.name("vllm_max_model_len")} is unset: the trainer passes the model\'s full context'
        if model_max:
            msg += f' ({model_max} tokens)'
            kvb = kv_bytes_per_token(ctx.model or {})
            if kvb:
                msg += (f'; vLLM must then fit one {model_max}-token sequence in its KV cache '
                        f'({kvb * model_max / 2**30:.2f} GiB at {kvb // 1024} KiB/token) and sizes its '
                        f'profiling run for it')
        need = (cfg.max_length or 0) + (cfg.max_completion_length or 0)
        out.append(Finding(WARNING, 'length.vllm-unset', ['vllm_max_model_len'], msg,
                           f'vllm_max_model_len: {need}' if cfg.max_length else
                           (f'vllm_max_model_len: <your longest prompt> + {cfg.max_completion_length} (grpo-data stats '
                            f'gives the prompt length)' if ctx.launch.framework == 'trl' else
                            'vllm_max_model_len: max_length + max_completion_length')))
    if cfg.use_vllm and cfg.max_model_len is not None and vllm_len is None:
        out.append(Finding(WARNING, 'length.max-model-len', ['max_model_len'],
                           f'max_model_len ({cfg.max_model_len}) is a model argument (context/RoPE override), not '
                           f'vLLM\'s; before ms-swift 3.8 it meant vLLM', f'vllm_max_model_len: {cfg.max_model_len}'))
    limit = vllm_len if (cfg.use_vllm and vllm_len is not None) else None
    which = ('the rollout server\'s max_model_len' if cfg.vllm_mode == 'server' else 'vllm_max_model_len')
    C = cfg.max_completion_length
    src = 'swift/infer_engine/infer_engine.py::set_default_max_tokens'
    if limit is not None and C >= limit:
        out.append(Finding(WARNING, 'length.completion-exceeds-context', ['max_completion_length', 'vllm_max_model_len'],
                           f'max_completion_length ({C}) >= {which} ({limit}): no prompt leaves room for a full '
                           f'completion; every completion is capped at {limit} - prompt tokens, so '
                           f'max_completion_length is never reached',
                           f'vllm_max_model_len: {C + (cfg.max_length or 1024)}', src))
    elif limit is not None:
        room = limit - C
        longest = cfg.max_length if cfg.max_length is not None else model_max
        stats = ctx.data_stats if ctx.data_stats and isinstance(ctx.data_stats.get('max'), int) else None
        if stats:
            longest = min(longest, stats['max']) if longest else stats['max']
        if longest is not None and longest >= limit and stats is not None:
            out.append(Finding(ERROR, 'length.prompt-fills-context', ['max_length', 'vllm_max_model_len'],
                               f'the data has prompts of {stats["max"]} tokens and max_length '
                               f'{cfg.max_length or "(unset)"} lets them through; a prompt of {limit} tokens or more '
                               f'stops the rollout: "Input length (N) leaves no room for generation with max_model_len '
                               f'({limit})"', f'max_length: {room} (and grpo-data filter), or vllm_max_model_len: '
                               f'{stats["max"] + C}', src))
        elif longest is not None and longest > room:
            what = f'prompts of up to {longest} tokens' if stats or cfg.max_length else 'prompts'
            stop = (f'; a prompt of {limit}+ tokens would stop the rollout ("Input length (N) leaves no room for '
                    f'generation")' if longest >= limit else '')
            known = stats is not None or cfg.max_length is not None  # else only the model context admits them
            trl = ctx.launch.framework == 'trl'
            if trl:  # TRL has no prompt limit: vLLM stops at max_model_len, and rejects a longer prompt
                stop = (f'; a prompt of more than {limit} tokens stops the rollout ("The decoder prompt (length N) '
                        f'is longer than the maximum model length of {limit}")' if longest > limit else '')
                trim = f'filter the data to prompts of <= {room} tokens (grpo-data filter --max-length {room})'
            else:
                trim = f'max_length: {room}'
            out.append(Finding(WARNING if known else INFO, 'length.completion-capped',
                               ([] if trl else ['max_length']) + ['max_completion_length', 'vllm_max_model_len'],
                               f'{what} are allowed but {which} is {limit}: a prompt longer than {room} tokens gets '
                               f'its completion capped at {limit} - prompt tokens'
                               + ('' if trl else ' (ms-swift logs "max_model_len - num_tokens < max_tokens")') + stop,
                               f'{trim} to keep every completion whole, or vllm_max_model_len: '
                               f'{longest + C}' if longest + C <= (model_max or longest + C) else trim,
                               'vllm/v1/engine/processor.py (prompt length check)' if trl else src))
    if cfg.max_length is None and cfg.rlhf_type == 'grpo' and ctx.launch.framework != 'trl':
        out.append(Finding(INFO, 'length.max-length-unset', ['max_length'],
                           f'max_length (the GRPO prompt limit) is unset, so it is the model context'
                           f'{f" ({model_max})" if model_max else ""}; over-long prompts are not caught',
                           'max_length: from `grpo-data stats --coverage 0.99`, then `grpo-data filter`'))
    return out


def rows_over(stats: dict, limit: int) -> int:
    """Rows of a ``grpo-data stats`` histogram longer than ``limit`` (exact at bin edges, else an upper bound)."""
    hist = stats.get('histogram') or {}
    edges, counts = hist.get('edges') or [], hist.get('counts') or []
    return sum(c for lo, c in zip(edges, counts) if lo > limit) + \
        sum(c for lo, hi, c in zip(edges, edges[1:], counts) if lo <= limit < hi - 1)


@rule
def data_lengths(ctx: Context) -> list[Finding]:
    st, cfg = ctx.data_stats, ctx.cfg
    if not st or not isinstance(st.get('max'), int):
        return []
    out = []
    limit = cfg.max_length
    if limit is not None and st['max'] > limit:
        over = rows_over(st, limit)
        share = over / max(1, st.get('count', 1))
        what = ('cut from the left' if cfg.truncation_strategy == 'left' else
                'resampled at rollout time (and after 10 failed draws per sample ms-swift stops with "resample: '
                'only collected X/Y valid samples")')
        out.append(Finding(WARNING if share > 0.01 else INFO, 'length.data-over-max-length', ['max_length', 'dataset'],
                           f'up to {over:,} of {st.get("count", 0):,} prompts ({share:.1%}) are longer than max_length '
                           f'{limit} (longest {st["max"]}); they will be {what}',
                           f'grpo-data filter DATA -o KEPT --max-length {limit}, or max_length: '
                           f'{st.get("max_length_for_coverage")} (covers {st.get("coverage", 0):.1%})'))
    want = (min(limit, st['max']) if limit else st['max']) + cfg.max_completion_length
    if cfg.use_vllm and (cfg.vllm_max_model_len is None or cfg.vllm_max_model_len > 2 * want):
        out.append(Finding(INFO, 'length.data-vllm-len', ['vllm_max_model_len'],
                           f'the data\'s longest prompt ({st["max"]} tokens) plus max_completion_length '
                           f'({cfg.max_completion_length}) needs a context of {want}; vllm_max_model_len is '
                           f'{cfg.vllm_max_model_len or "the model default"}', f'vllm_max_model_len: {want}'))
    return out


# --------------------------------------------------------------------------------------------
# vLLM and rollout options
# --------------------------------------------------------------------------------------------

@rule
def vllm_mode_rules(ctx: Context) -> list[Finding]:
    cfg = ctx.cfg
    src = 'swift/arguments/rlhf_args.py::_init_rollout'
    if cfg.use_vllm and cfg.vllm_mode is None:
        return [Finding(ERROR, 'vllm.mode', ['vllm_mode'], 'vllm_mode is required when use_vllm is true',
                        'vllm_mode: colocate (or server, with `swift rollout` on its own GPUs)', src)]
    if not cfg.use_vllm and cfg.vllm_mode is not None:
        return [Finding(ERROR, 'vllm.mode', ['vllm_mode', 'use_vllm'],
                        'vllm_mode is not supported when use_vllm is false', 'use_vllm: true', src)]
    out = []
    if not cfg.use_vllm and cfg.rlhf_type == 'grpo':
        out.append(Finding(INFO, 'vllm.off', ['use_vllm'], 'use_vllm is false: rollouts use HF generate, which is '
                           'many times slower', 'use_vllm: true with vllm_mode: colocate'))
    u = cfg.vllm_gpu_memory_utilization
    if cfg.use_vllm and not 0 < u <= 1:
        out.append(Finding(ERROR, 'vllm.utilization', ['vllm_gpu_memory_utilization'],
                           f'gpu_memory_utilization Input should be less than or equal to 1 (got {u}) [vLLM]'
                           if u > 1 else f'vllm_gpu_memory_utilization must be > 0 (got {u})',
                           'vllm_gpu_memory_utilization: 0.5'))
    return out


@rule
def colocate_only_options(ctx: Context) -> list[Finding]:
    cfg = ctx.cfg
    if cfg.use_vllm and cfg.vllm_mode == 'colocate':
        return []
    active = [n for n in ('sleep_level', 'offload_model', 'offload_optimizer') if getattr(cfg, n)]
    return [Finding(WARNING, 'vllm.colocate-only', [name],
                    f'{name} only acts in colocate mode (vllm_mode {cfg.vllm_mode!r}, use_vllm {cfg.use_vllm}); '
                    f'ms-swift ignores it here', f'remove {name}',
                    'swift/arguments/rlhf_args.py::_init_grpo; docs GRPO.md') for name in active]


@rule
def async_generate_needs_server(ctx: Context) -> list[Finding]:
    cfg = ctx.cfg
    if cfg.async_generate and cfg.vllm_mode != 'server':
        return [Finding(ERROR, 'vllm.async-generate', ['async_generate', 'vllm_mode'],
                        'async generate require vllm_mode == server', 'async_generate: false, or vllm_mode: server',
                        'swift/arguments/rlhf_args.py::_init_rollout')]
    return []


@rule
def ds3_gather(ctx: Context) -> list[Finding]:
    cfg = ctx.cfg
    if cfg.use_vllm and not cfg.ds3_gather_for_generation:
        return [Finding(ERROR, 'vllm.ds3-gather', ['ds3_gather_for_generation'],
                        'ds3_gather_for_generation false is not supported with vLLM: the weights cannot be synced '
                        'to the rollout engine', 'ds3_gather_for_generation: true (and move_model_batches: 8 to '
                        'cap the ZeRO-3 gather peak)', 'trl GRPOConfig docs; ms-swift.md §1.4')]
    return []


@rule
def expandable_segments_with_sleep(ctx: Context) -> list[Finding]:
    cfg = ctx.cfg
    conf = ctx.environ.get('PYTORCH_CUDA_ALLOC_CONF', '') + ',' + ctx.launch.file_env.get('PYTORCH_CUDA_ALLOC_CONF', '')
    if cfg.use_vllm and cfg.effective_sleep_level > 0 and re.search(r'expandable_segments\s*:\s*True', conf):
        return [Finding(WARNING, 'vllm.expandable-segments', ['PYTORCH_CUDA_ALLOC_CONF', 'sleep_level'],
                        'PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True conflicts with vLLM sleep mode (cumem): '
                        'sleep can free 0 GiB on older ms-swift/vLLM; current ms-swift toggles it off around vLLM',
                        'upgrade to ms-swift >= 4.6 and a recent vLLM, or drop expandable_segments',
                        'https://github.com/modelscope/ms-swift/issues/6636')]
    return []


@rule
def qlora_server(ctx: Context) -> list[Finding]:
    cfg = ctx.cfg
    if cfg.quant_method == 'bnb' and cfg.use_vllm and cfg.vllm_mode == 'server':
        return [Finding(ERROR, 'quant.qlora-server', ['quant_method', 'vllm_mode'],
                        'bnb QLoRA with a server-mode rollout fails at weight loading (unsupported)',
                        'vllm_mode: colocate (ms-swift sets vllm_quantization bitsandbytes), or a GPTQ/AWQ '
                        'checkpoint', 'https://github.com/modelscope/ms-swift/issues/6884')]
    return []


# --------------------------------------------------------------------------------------------
# Tuner, rewards, packages and versions
# --------------------------------------------------------------------------------------------

@rule
def ref_model_with_lora(ctx: Context) -> list[Finding]:
    cfg = ctx.cfg
    if cfg.ref_model and cfg.is_lora:
        return [Finding(ERROR, 'tuner.ref-model', ['ref_model', 'tuner_type'],
                        'CPO/ORPO or LoRA training does not require a ref_model to be passed in.',
                        'remove ref_model (LoRA disables the adapter to get reference log-probs)',
                        'swift/arguments/rlhf_args.py::__post_init__')]
    if cfg.tuner_type == 'full' and cfg.beta != 0:
        return [Finding(INFO, 'tuner.ref-model-loaded', ['beta', 'tuner_type'],
                        f'full-parameter training with beta={cfg.beta}: ms-swift loads a second copy of the model '
                        f'as the reference', 'beta: 0 drops it (examples/train/grpo/external/grpo_32b_full.sh)')]
    return []


@rule
def reward_rules(ctx: Context) -> list[Finding]:
    cfg = ctx.cfg
    if ctx.launch.framework == 'trl':
        return []  # TRL scripts pass their reward functions in code
    out = []
    # grpo_trainer.py: `if not self.reward_funcs and not self.use_gym_env and not self._has_teacher: raise`; in
    # server mode use_gym_env is the rollout server's unless the trainer sets it (rollout_mixin.py)
    teacher = cfg.teacher_model or cfg.teacher_model_server
    if cfg.rlhf_type == 'grpo' and not cfg.reward_funcs and not cfg.reward_model and not teacher \
            and not cfg.use_gym_env:
        server = cfg.use_vllm and cfg.vllm_mode == 'server' and cfg.use_gym_env is None
        r = ctx.launch.rollout
        if server and r is not None and r.use_gym_env:
            pass  # the rollout server runs a gym environment: its rewards
        elif server and r is None:
            out.append(Finding(WARNING, 'reward.none', ['reward_funcs'],
                               'no reward_funcs or reward_model: ms-swift stops ("You must specify reward_funcs or '
                               'reward_model") unless the rollout server runs a gym environment (--use_gym_env true)',
                               'reward_funcs: [accuracy, format], or give the server\'s command with --rollout',
                               'swift/rlhf_trainers/grpo_trainer.py'))
        else:
            out.append(Finding(ERROR, 'reward.none', ['reward_funcs'], 'You must specify reward_funcs or reward_model',
                               'reward_funcs: [accuracy, format]', 'swift/rlhf_trainers/grpo_trainer.py'))
    builtin = set(swift_args.snapshot().get('builtin_reward_funcs', []))
    unknown = [r for r in cfg.reward_funcs if r not in builtin]
    if unknown and not cfg.external_plugins:
        for r in unknown:
            out.append(Finding(ERROR, 'reward.unknown', ['reward_funcs'],
                               f'reward_function {r} is not implemented in swift.rewards (built-ins: '
                               f'{", ".join(sorted(builtin))}); ms-swift only finds out when the trainer is built',
                               'fix the name, or register it in a file given with external_plugins',
                               'swift/rlhf_trainers/grpo_trainer.py'))
    elif unknown:
        out.append(Finding(INFO, 'reward.plugin', ['reward_funcs', 'external_plugins'],
                           f'reward(s) {", ".join(unknown)} must be registered by external_plugins '
                           f'({", ".join(cfg.external_plugins)}); not checked before launch', None))
    n_rewards = len(cfg.reward_funcs) + len(cfg.reward_model or [])
    if cfg.reward_weights is not None and len(cfg.reward_weights) != n_rewards:
        out.append(Finding(ERROR, 'reward.weights', ['reward_weights'],
                           f'Number of reward weights ({len(cfg.reward_weights)}) must match number of reward '
                           f'functions ({n_rewards})', f'reward_weights: {[1.0] * n_rewards}',
                           'swift/rlhf_trainers/grpo_trainer.py'))
    if 'accuracy' in cfg.reward_funcs:
        if ctx.packages.get('math-verify') is None:
            out.append(Finding(ERROR, 'reward.math-verify', ['reward_funcs'],
                               'The math_verify package is required by the accuracy reward',
                               'pip install math-verify', 'swift/rewards/orm.py::MathAccuracy'))
        for path, cols in ctx.dataset_columns.items():
            if cols is None:
                continue
            renamed = set(cols) | set(_column_renames(cfg.columns).get(c) for c in cols) - {None}
            if 'solution' not in renamed:
                out.append(Finding(ERROR, 'reward.solution-column', ['dataset', 'columns'],
                                   f'the accuracy reward needs a `solution` column; {path} has '
                                   f'{", ".join(cols)}', 'columns: {"answer": "solution"} if `answer` holds the '
                                   'final answer, or preprocess the data (the launchers do)',
                                   'docs FAQ Q26; swift/rewards/orm.py'))
    return out


def _column_renames(columns: str | None) -> dict:
    import json
    if not columns:
        return {}
    try:
        v = json.loads(columns)
    except (ValueError, TypeError):
        return {}
    return v if isinstance(v, dict) else {}


@rule
def package_rules(ctx: Context) -> list[Finding]:
    pk = ctx.packages
    out = []
    if ctx.launch.framework == 'trl':
        return []
    swift_v = version_tuple(pk.get('ms-swift'))
    if 'ms-swift' in pk and swift_v is None:
        out.append(Finding(ERROR, 'version.swift-missing', ['ms-swift'], 'ms-swift is not installed here',
                           'pip install "ms-swift>=4.6,<4.7"'))
        return out
    if swift_v is not None and swift_v < (4,):
        out.append(Finding(ERROR, 'version.swift-3x', ['tuner_type'],
                           f'ms-swift {pk["ms-swift"]} is 3.x: it knows --train_type, not --tuner_type, and the '
                           f'recipes here are written for 4.x names', 'pip install "ms-swift>=4.6,<4.7"',
                           'ms-swift.md §1.11'))
        if (3, 12, 0) <= swift_v <= (3, 12, 5) and ctx.cfg.zero_stage == 3 and ctx.cfg.vllm_mode == 'colocate':
            out.append(Finding(ERROR, 'known.zero3-sync-3.12', ['deepspeed', 'vllm_mode'],
                               f'ms-swift {pk["ms-swift"]} gathers the whole ZeRO-3 model at once for the vLLM weight '
                               f'sync and OOMs (fixed in 3.12.6 and 4.0.0)', 'upgrade ms-swift',
                               'https://github.com/modelscope/ms-swift/issues/7986 (#7926, PR #8078/#8091)'))
    trl_v = version_tuple(pk.get('trl'))
    if swift_v is not None and swift_v >= (4, 2) and trl_v is not None and trl_v < (0, 26):
        out.append(Finding(ERROR, 'version.trl', ['trl'], f'ms-swift {pk["ms-swift"]} requires trl>=0.26 (found '
                           f'{pk["trl"]})', 'pip install "trl>=0.26,<1.0"', 'swift/rlhf_trainers/arguments.py'))
    if 'msgspec' in pk and pk['msgspec'] is None:
        out.append(Finding(ERROR, 'version.msgspec', ['msgspec'], 'msgspec is not installed: the GRPO trainer import '
                           'fails with ModuleNotFoundError (ms-swift does not declare it)', 'pip install msgspec',
                           'swift/rlhf_trainers/utils.py'))
    if ctx.cfg.deepspeed and 'deepspeed' in pk and pk['deepspeed'] is None:
        out.append(Finding(WARNING, 'version.deepspeed', ['deepspeed'], 'deepspeed is not installed here; ms-swift '
                           'fails with "The \'deepspeed\' distribution was not found" on a machine without it',
                           'pip install "grpo-recipes[gpu]" on the training machine'))
    return out


def run_rules(ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    for fn in RULES:
        findings.extend(fn(ctx))
    findings.sort(key=lambda f: SEVERITY_ORDER[f.severity])
    return findings
