"""Devices and processes: CUDA_VISIBLE_DEVICES, NPROC_PER_NODE / accelerate processes, the rollout
server's GPUs, torchrun's multi-node environment."""

from __future__ import annotations

from ..findings import ERROR, INFO, WARNING, Finding
from .registry import Context, rule


def _ids(ids) -> str:
    return ','.join(str(i) for i in ids)


@rule(
    'device.single-process-multi-gpu', 'device.nproc-exceeds-visible', 'device.visible-vs-nproc', 'device.data-parallel'
)
def visible_gpus_match_nproc(ctx: Context) -> list[Finding]:
    """ms-swift enters device_map (model-parallel) mode when a process sees >= 2 GPUs
    (swift/utils/env.py::is_mp: n_gpu // local_world_size >= 2)."""
    p, cfg = ctx.plan, ctx.cfg
    if p.visible_count is None or p.visible_count == 0:
        return []
    vis = p.visible_gpus or []
    if ctx.launch.fw.launcher_places_processes:
        return _trl_devices(ctx, vis)
    if ctx.launch.trl.swift_infer_workers:
        return []  # ms-swift < 3.6's in-trainer vLLM GPUs: in_trainer_vllm_layout checks them
    if p.nproc_per_node is None and p.nnodes == 1:
        if p.visible_count < 2:
            return []
        sev = ERROR if cfg.use_vllm else WARNING
        entry = ctx.launch.trl.entry or {}
        unused = entry.get('unused_env', {}).get('NPROC_PER_NODE')
        why = (
            f'NPROC_PER_NODE={unused} has no effect on `{entry.get("display")}`: only `swift rlhf` '
            f'(swift/cli/main.py) reads it and starts torchrun, and this runs the entry file directly'
            if unused
            else 'NPROC_PER_NODE is unset'
        )
        msg = (
            f'{p.visible_count} GPUs are visible ({_ids(vis)}) but {why}: ms-swift starts one '
            f'process that wraps the model across all of them (device_map), and memory grows on every GPU'
        )
        if cfg.use_vllm:
            msg += (
                '. With vLLM it stops with "GRPO with vLLM is not compatible with device_map. Please set '
                'NPROC_PER_NODE equal to num_processes."'
            )
        return [
            Finding(
                sev,
                'device.single-process-multi-gpu',
                ['NPROC_PER_NODE', 'CUDA_VISIBLE_DEVICES'],
                msg,
                (
                    f'run it as `swift rlhf` with NPROC_PER_NODE={p.visible_count}'
                    if unused
                    else f'ENV: {{NPROC_PER_NODE: {p.visible_count}}}'
                )
                + f', or CUDA_VISIBLE_DEVICES={vis[0]} for a single training GPU',
                'swift/arguments/rlhf_args.py::_check_grpo; ms-swift #5592',
            )
        ]
    nproc = p.nproc_per_node
    if nproc is None or nproc <= 0:
        return []
    if p.visible_count == nproc:
        return []
    if p.visible_count < nproc:
        return [
            Finding(
                ERROR,
                'device.nproc-exceeds-visible',
                ['NPROC_PER_NODE', 'CUDA_VISIBLE_DEVICES'],
                f'NPROC_PER_NODE={nproc} but only {p.visible_count} GPU(s) are visible ({_ids(vis)}): '
                f'torchrun starts {nproc} processes and the extra ones have no GPU',
                f'ENV: {{NPROC_PER_NODE: {p.visible_count}}}',
            )
        ]
    mode = 'server' if cfg.vllm_mode == 'server' else None
    fix_ids = _ids(vis[:nproc])
    msg = (
        f'{p.visible_count} GPUs are visible ({_ids(vis)}) to {nproc} process(es) per node: ms-swift sees '
        f'{p.visible_count // nproc if p.visible_count % nproc == 0 else "an uneven number of"} GPUs per process '
        f'and enters device_map mode'
    )
    if p.visible_count % nproc:
        msg += f' (its own assert fails first: "n_gpu: {p.visible_count}, local_world_size: {nproc}")'
    if mode == 'server':
        msg += '; in server mode hide the rollout GPUs from the trainer'
    return [
        Finding(
            ERROR,
            'device.visible-vs-nproc',
            ['CUDA_VISIBLE_DEVICES', 'NPROC_PER_NODE'],
            msg,
            f'ENV: {{CUDA_VISIBLE_DEVICES: "{fix_ids}", NPROC_PER_NODE: {nproc}}} or NPROC_PER_NODE: {p.visible_count}',
            'swift/utils/env.py::is_mp',
        )
    ]


def _trl_devices(ctx: Context, vis: list[int]) -> list[Finding]:
    """TRL: one plain process seeing several GPUs is wrapped in DataParallel by the HF Trainer; accelerate
    gives process i the GPU cuda:i of those it sees (extra visible GPUs stay idle, no device_map)."""
    p, cfg = ctx.plan, ctx.cfg
    launcher = ctx.launch.trl.launcher
    # One process without a distributed launcher (python, or accelerate/trl grpo with one process: accelerate's
    # simple launcher sets no LOCAL_RANK) is DistributedType.NO, where TrainingArguments sets n_gpu to every
    # visible GPU (transformers/training_args.py _setup_devices); torchrun/deepspeed make even one process
    # distributed, with one GPU.
    acc = ctx.launch.trl.accelerate or {}
    distributed = launcher in ('torchrun', 'deepspeed') or acc.get('zero_stage') is not None or acc.get('fsdp')
    single = p.processes_per_node == 1 and p.nnodes == 1 and not distributed
    if single:
        if p.visible_count < 2:
            return []
        msg = (
            f'`{ctx.launch.trl.display or launcher}` is one process that sees {p.visible_count} GPUs '
            f'({_ids(vis)}): the HF Trainer wraps the model in nn.DataParallel ("if self.args.n_gpu > 1: model = '
            f'nn.DataParallel(model)", transformers/trainer.py _wrap_model), so forward and log-prob passes '
            f'replicate onto every visible GPU'
        )
        if cfg.use_vllm:
            msg += ', including the one meant for vLLM, whose memory then grows until CUDA OOM'
        return [
            Finding(
                ERROR if cfg.use_vllm else WARNING,
                'device.data-parallel',
                ['CUDA_VISIBLE_DEVICES'],
                msg,
                f'CUDA_VISIBLE_DEVICES={vis[0]} {ctx.launch.trl.prefix or launcher} ... for one '
                f'training GPU (and the vLLM server on '
                f'another: CUDA_VISIBLE_DEVICES={vis[-1]} trl vllm-serve ...), or accelerate launch '
                f'--multi_gpu --num_processes {p.visible_count} ...',
                'transformers/trainer.py::_wrap_model; transformers/training_args.py::_setup_devices',
            )
        ]
    if p.visible_count < p.processes_per_node:
        gids = ctx.launch.trl.gpu_ids
        return [
            Finding(
                ERROR,
                'device.nproc-exceeds-visible',
                ['num_processes', 'gpu_ids'],
                f'accelerate starts {p.processes_per_node} process(es) per node but only {p.visible_count} '
                f'GPU(s) are visible ({_ids(vis)}{", from --gpu_ids" if gids else ""}): the extra processes '
                f'have no GPU',
                f'--num_processes {p.visible_count}, or --gpu_ids with {p.processes_per_node} ids',
                'accelerate/utils/launch.py::prepare_multi_gpu_env',
            )
        ]
    return []


@rule('device.bad-ids', 'device.none-visible', 'device.duplicate-ids', 'device.missing')
def visible_gpus_exist(ctx: Context) -> list[Finding]:
    """CUDA_VISIBLE_DEVICES that cannot work: not a list of ids, empty with vLLM, a GPU twice, or ids this
    node lacks (torch/cuda ``_parse_visible_devices``; vLLM cannot start on no GPU)."""
    p, hw = ctx.plan, ctx.hw
    out = []
    raw = ctx.launch.env.get('CUDA_VISIBLE_DEVICES')
    if raw is not None and raw.strip() and p.visible_gpus is None:
        return [
            Finding(
                ERROR,
                'device.bad-ids',
                ['CUDA_VISIBLE_DEVICES'],
                f'CUDA_VISIBLE_DEVICES={raw!r} is not a comma-separated list of GPU ids',
                'CUDA_VISIBLE_DEVICES: "0,1"',
            )
        ]
    if raw is not None and raw.strip() == '' and ctx.cfg.use_vllm:
        out.append(
            Finding(
                ERROR,
                'device.none-visible',
                ['CUDA_VISIBLE_DEVICES'],
                'CUDA_VISIBLE_DEVICES is empty: training would run on CPU and vLLM cannot start',
                'CUDA_VISIBLE_DEVICES: "0"',
            )
        )
    vis = p.visible_gpus or []
    if len(set(vis)) != len(vis):
        out.append(
            Finding(
                ERROR,
                'device.duplicate-ids',
                ['CUDA_VISIBLE_DEVICES'],
                f'CUDA_VISIBLE_DEVICES={raw} lists a GPU twice',
                f'CUDA_VISIBLE_DEVICES: "{_ids(sorted(set(vis)))}"',
            )
        )
    if hw.gpus is not None and raw is not None:
        missing = [i for i in vis if i >= hw.gpus]
        if missing:
            out.append(
                Finding(
                    ERROR,
                    'device.missing',
                    ['CUDA_VISIBLE_DEVICES'],
                    f'GPU(s) {_ids(missing)} do not exist: this node has {hw.gpus} GPU(s) '
                    f'(ids 0..{hw.gpus - 1}, from {hw.source})',
                    f'CUDA_VISIBLE_DEVICES: "{_ids(range(min(len(vis), hw.gpus)))}"',
                )
            )
    return out


@rule(
    'device.rollout-gpus-unused',
    'device.rollout-gpus-unknown',
    'device.rollout-overlap',
    'device.rollout-count',
    'device.total',
)
def rollout_gpus(ctx: Context) -> list[Finding]:
    """Server mode: `swift rollout` runs on its own GPUs (its own CUDA_VISIBLE_DEVICES). It refuses fewer than
    TP x DP of them (swift/arguments/deploy_args.py RolloutArguments, "local_device_count ... must be greater than or
    equal"), and GPUs shared with training or missing from the node fail at vLLM start-up."""
    cfg, p, hw = ctx.cfg, ctx.plan, ctx.hw
    srv = ctx.launch.fw.server  # a fix for the server is written on its own command line (`swift rollout`)
    if ctx.launch.trl.vllm_device_gpu is not None:
        return []  # TRL 0.14-0.15's in-trainer vLLM: trl.vllm-device checks its GPU as TRL did
    if not (cfg.rollout_mode == 'server'):
        if p.rollout_gpus:
            return [
                Finding(
                    WARNING,
                    'device.rollout-gpus-unused',
                    ['--rollout-gpus'],
                    f'--rollout-gpus {_ids(p.rollout_gpus)} given, but vllm_mode is {cfg.vllm_mode!r}: '
                    f'no rollout server runs',
                    'drop --rollout-gpus, or vllm_mode: server',
                )
            ]
        return []
    if p.rollout_gpus is None:
        return [
            Finding(
                INFO,
                'device.rollout-gpus-unknown',
                ['--rollout-gpus'],
                "server mode: the rollout server's GPUs are not known, so overlap and count are not checked",
                f'give the guard the server\'s command: --rollout "CUDA_VISIBLE_DEVICES=IDS {srv} ..."',
            )
        ]
    out = []
    need = max(1, cfg.vllm_tensor_parallel_size) * max(1, cfg.vllm_data_parallel_size)
    arg = ctx.launch.fw.server_arg  # the server's own flags: the trainer's vllm_* settings are ignored in server mode
    have = len(p.rollout_gpus)
    train = set(p.visible_gpus or [])
    if ctx.launch.fw.launcher_places_processes and ctx.launch.trl.launcher != 'python':
        train = set((p.visible_gpus or [])[: p.processes_per_node])  # accelerate/torchrun: process i on cuda:i
    overlap = sorted(train & set(p.rollout_gpus))
    here = p.nnodes == 1 and not p.rollout_remote  # the server shares this node's GPUs
    if overlap and here:
        out.append(
            Finding(
                ERROR,
                'device.rollout-overlap',
                ['CUDA_VISIBLE_DEVICES', '--rollout-gpus'],
                f'GPU(s) {_ids(overlap)} are given to both training ({_ids(p.visible_gpus or [])}) and '
                f'the rollout server ({_ids(p.rollout_gpus)}): vLLM reserves '
                f'{cfg.vllm_gpu_memory_utilization:.0%} of them and training OOMs',
                _overlap_fix(sorted(train), sorted(p.rollout_gpus), hw.gpus, srv),
            )
        )
    if have < need:
        out.append(
            Finding(
                ERROR,
                'device.rollout-count',
                ['vllm_tensor_parallel_size', 'vllm_data_parallel_size', '--rollout-gpus'],
                f'Error: local_device_count ({have}) must be greater than or equal to the product of '
                f'vllm_data_parallel_size ({cfg.vllm_data_parallel_size}) and vllm_tensor_parallel_size '
                f'({cfg.vllm_tensor_parallel_size}) ({need}) [swift rollout]',
                f'CUDA_VISIBLE_DEVICES=<{need} GPU ids> {srv} ..., or {srv} ... '
                f'{arg("tensor_parallel_size")} {max(1, have // max(1, cfg.vllm_data_parallel_size))}',
                'swift/arguments/deploy_args.py::RolloutArguments',
            )
        )
    elif have > need:
        out.append(
            Finding(
                WARNING,
                'device.rollout-count',
                ['--rollout-gpus'],
                f'the rollout server gets {have} GPUs but uses only dp×tp = {need}; the rest idle',
                f'CUDA_VISIBLE_DEVICES={_ids(p.rollout_gpus[:need])} {srv} ...',
            )
        )
    if ctx.hw.gpus is not None and here:
        used = train | set(p.rollout_gpus)
        if len(used) > hw.gpus or any(i >= hw.gpus for i in used):
            out.append(
                Finding(
                    ERROR,
                    'device.total',
                    ['CUDA_VISIBLE_DEVICES', '--rollout-gpus'],
                    f'training ({len(train)}) plus rollout ({have}) GPUs need ids {_ids(sorted(used))}, '
                    f'but this node has {hw.gpus} GPU(s) (ids 0..{hw.gpus - 1}): "The requested device '
                    f'for vllm is not available"',
                    'use fewer training processes (NPROC_PER_NODE and CUDA_VISIBLE_DEVICES), or fewer GPUs for '
                    f'the server: {srv} ... {arg("tensor_parallel_size")} N (on its CUDA_VISIBLE_DEVICES)',
                )
            )
    return out


def _overlap_fix(train: list[int], rollout: list[int], node: int | None, srv: str) -> str:
    """Training off the server's GPUs, or (where the node has enough) the server on GPUs training does not use: on
    the server's own command line, its CUDA_VISIBLE_DEVICES."""
    keep = [i for i in train if i not in rollout]
    free = [i for i in range(node or 0) if i not in train]
    out = f'CUDA_VISIBLE_DEVICES: "{_ids(keep)}" for training (and NPROC_PER_NODE to match)'
    if len(free) >= len(rollout):
        ids = _ids(free[: len(rollout)])
        out += f', or the server on GPUs training does not use: CUDA_VISIBLE_DEVICES={ids} {srv} ...'
    return out


@rule('launch.env-int', 'launch.multi-node', 'launch.nproc')
def multi_node_env(ctx: Context) -> list[Finding]:
    """torchrun's environment (NNODES, NODE_RANK, NPROC_PER_NODE, MASTER_ADDR): non-integers, a rank out of
    range, or a multi-node launch without rank and master (swift/cli/main.py ``get_torchrun_args``; torchrun
    cannot form the group)."""
    env, p = ctx.launch.env, ctx.plan
    out = []
    from ..frontends.shell_expand import unresolved

    for key in ('NNODES', 'NODE_RANK', 'NPROC_PER_NODE', 'MASTER_PORT'):
        raw = env.get(key)
        if raw is not None and unresolved(raw):
            continue  # NODE_RANK=$RANK: the cluster sets it (the reader refuses an unresolved count itself)
        if raw is not None and not raw.strip().isdigit():
            out.append(
                Finding(
                    ERROR,
                    'launch.env-int',
                    [key],
                    f'{key}={raw!r} must be a non-negative integer',
                    f'ENV: {{{key}: <integer>}}',
                )
            )
    if out:
        return out
    if 'NNODES' in env and int(env['NNODES']) < 1:
        out.append(Finding(ERROR, 'launch.multi-node', ['NNODES'], 'NNODES must be >= 1', 'ENV: {NNODES: 1}'))
    if 'NPROC_PER_NODE' in env and int(env['NPROC_PER_NODE']) < 1:
        out.append(
            Finding(
                ERROR, 'launch.nproc', ['NPROC_PER_NODE'], 'NPROC_PER_NODE must be >= 1', 'ENV: {NPROC_PER_NODE: 1}'
            )
        )
    if p.nnodes > 1:
        missing = [k for k in ('NODE_RANK', 'MASTER_ADDR') if not env.get(k)]
        if missing:
            out.append(
                Finding(
                    ERROR,
                    'launch.multi-node',
                    missing,
                    f'NNODES={p.nnodes} but {" and ".join(missing)} unset: torchrun cannot form the group '
                    f'(each node needs its own NODE_RANK and the same MASTER_ADDR)',
                    'export NODE_RANK=<0..NNODES-1> MASTER_ADDR=<ip of node 0> on every node',
                )
            )
        if p.node_rank is not None and p.node_rank >= p.nnodes:
            out.append(
                Finding(
                    ERROR,
                    'launch.multi-node',
                    ['NODE_RANK', 'NNODES'],
                    f'NODE_RANK={p.node_rank} must be below NNODES={p.nnodes}',
                    f'NODE_RANK: one of 0..{p.nnodes - 1}',
                )
            )
        if p.nproc_per_node is None:
            out.append(
                Finding(
                    ERROR,
                    'launch.multi-node',
                    ['NPROC_PER_NODE'],
                    f'NNODES={p.nnodes} without NPROC_PER_NODE: torchrun starts 1 process per node',
                    'ENV: {NPROC_PER_NODE: <GPUs per node>}',
                )
            )
    elif p.node_rank not in (None, 0):
        out.append(
            Finding(
                ERROR,
                'launch.multi-node',
                ['NODE_RANK', 'NNODES'],
                f'NODE_RANK={p.node_rank} on a single-node launch (NNODES unset or 1)',
                'set NNODES to the number of nodes, or drop NODE_RANK',
            )
        )
    return out


@rule('device.infer-workers')
def in_trainer_vllm_layout(ctx: Context) -> list[Finding]:
    """ms-swift < 3.6 ran vLLM inside the trainer: the release's own start-up errors about its GPUs (the layout
    assertion of 3.2.2-3.4, a vllm_device that does not exist), as frontends/swift/versions.py ``in_trainer_vllm``
    read them with the release's code."""
    info = ctx.launch.trl.swift_infer_workers or {}  # set by ms-swift's front end alone
    if not info.get('error'):
        return []
    message, fix, source = info['error']
    return [Finding(ERROR, 'device.infer-workers', ['NPROC_PER_NODE', 'CUDA_VISIBLE_DEVICES'], message, fix, source)]
