"""The rollout server's own start-up checks (``swift rollout`` / ``trl vllm-serve``): its arguments, its GPUs
(TP x DP of them, all existing), its heads and its context. Used beside a trainer (a rule) and for a server
checked on its own (:func:`grpo_recipes.check.check_rollout`)."""

from __future__ import annotations

from ..findings import ERROR, WARNING, Finding, declare
from ..hardware import Hardware
from ..memory.arch import model_max_len
from ..memory.vllm_engine import max_len_refusal, tp_heads_refusal
from .registry import Context, rule
from .rollout_port import port_findings


def rollout_findings(r, hw: Hardware, model: dict | None, as_error: bool) -> list[Finding]:
    """The server's own start-up checks. ``as_error``: the server is what is being launched (an unknown
    argument stops it); beside a trainer it is a warning, as the server runs in another terminal."""
    out: list[Finding] = []
    fw = r.fw
    srv = fw.server
    for u in r.unknown:
        out.append(
            Finding(
                ERROR if as_error else WARNING,
                'rollout.unknown-argument',
                ['rollout'],
                f'{srv} ({r.source}): {u}; as written the server stops at start-up'
                + (f' (planned with the intended value {r.intended})' if r.intended and not as_error else ''),
                'a value of the type the message names' if 'parser stops with' in u else 'use the current name shown',
                fw.server_unknown_source,
            )
        )
    gpus = r.gpus
    have = len(gpus) if gpus is not None else hw.gpus
    need = r.gpus_needed
    tp, dp = r.flag('tensor_parallel_size'), r.flag('data_parallel_size')
    if have is not None and have < need:
        msg = (
            f'Error: local_device_count ({have}) must be greater than or equal to the product of '
            f'vllm_data_parallel_size ({r.data_parallel_size}) and vllm_tensor_parallel_size '
            f'({r.tensor_parallel_size}) ({need})'
            if fw.server_gpu_check_source
            else f'{tp} {r.tensor_parallel_size} x {dp} {r.data_parallel_size} needs {need} GPUs but {have} are visible'
        )
        out.append(
            Finding(
                ERROR,
                'rollout.gpu-count',
                [tp.lstrip('-'), dp.lstrip('-'), 'CUDA_VISIBLE_DEVICES'],
                f'{srv} ({r.source}): {msg}',
                f'CUDA_VISIBLE_DEVICES=<{need} GPU ids> {srv} ..., or {srv} ... '
                f'{fw.server_arg("data_parallel_size")} {max(1, have // r.tensor_parallel_size)}',
                fw.server_gpu_check_source,
            )
        )
    if gpus is not None and hw.gpus is not None:
        missing = [i for i in gpus if i >= hw.gpus]
        if missing:
            out.append(
                Finding(
                    ERROR,
                    'rollout.gpu-missing',
                    ['CUDA_VISIBLE_DEVICES'],
                    f'{srv} ({r.source}): GPU(s) {",".join(map(str, missing))} do not exist: this node has '
                    f'{hw.gpus} GPU(s) (ids 0..{hw.gpus - 1})',
                    'CUDA_VISIBLE_DEVICES on existing ids',
                )
            )
    heads = (model or {}).get('num_attention_heads')
    refusal = tp_heads_refusal(heads, max(1, r.tensor_parallel_size))
    if refusal:
        out.append(
            Finding(
                ERROR,
                'rollout.tp-heads',
                [tp.lstrip('-')],
                f'{refusal} [vLLM, at engine start]',
                f'{srv} ... {fw.server_arg("tensor_parallel_size")} one of '
                f'{[t for t in (1, 2, 4, 8) if heads % t == 0]}',
                'vllm/config/model.py',
            )
        )
    mmax = model_max_len(model)
    refusal = max_len_refusal(r.max_model_len, mmax)
    if refusal:
        out.append(
            Finding(
                ERROR,
                'rollout.max-model-len',
                [r.flag('max_model_len').lstrip('-')],
                f'{refusal} [vLLM, at engine start]',
                f'{srv} ... {fw.server_arg("max_model_len")} {mmax}',
                'vllm/config/model.py',
            )
        )
    return out


declare(f'{__name__}.rollout_findings', ('rollout.gpu-count', 'rollout.gpu-missing'))


@rule('rollout.unknown-argument', 'rollout.tp-heads', 'rollout.max-model-len')
def rollout_server_arguments(ctx: Context) -> list[Finding]:
    """Server mode with the rollout command known: the server's own start-up checks, as warnings beside the
    trainer: arguments its parser rejects (swift/pipelines/base.py remaining_argv; trl/scripts/vllm_serve.py
    TrlParser), a TP that does not divide the heads and a context over the model's (vllm/config/model.py). Its GPU
    count and overlap are the device rules' business."""
    r = ctx.launch.rollout
    if r is None or not (ctx.cfg.rollout_mode == 'server'):
        return []
    # a server command the guard says cannot start stops the launch too: an error, as when it is checked alone;
    # one only quoted in a comment (ms-swift's examples document the server that way) stays a warning
    return [
        f
        for f in rollout_findings(r, ctx.hw, ctx.model, as_error=not r.commented)
        if f.rule not in ('rollout.gpu-count', 'rollout.gpu-missing')
    ] + port_findings(ctx.cfg, r)


@rule('rollout.foreground')
def rollout_in_the_foreground(ctx: Context) -> list[Finding]:
    """A script that starts its rollout server without ``&`` before its training launch (``trl vllm-serve ...`` on one
    line, ``accelerate launch ...`` on the next): bash runs a command to its end before the next line, and a server
    runs until it is stopped, so the launch never starts when the script is run as written."""
    r = ctx.launch.rollout
    if r is None or not r.foreground:
        return []
    return [
        Finding(
            WARNING,
            'rollout.foreground',
            ['rollout'],
            f'{r.fw.server} ({r.foreground}) runs in the foreground: bash waits for it to exit, and a server does '
            'not, so the training launch after it never starts when the script runs as written',
            "end the server's line with ` &` (the trainer waits for the server to answer), or start it in another "
            'shell',
        )
    ]
