"""Lengths: prompts, completions, vLLM's context and the data's prompt lengths."""

from __future__ import annotations

from ..findings import ERROR, INFO, WARNING, Finding
from ..memory.arch import Arch, model_max_len
from ..memory.vllm import vllm_kv_bytes_per_token
from ..memory.vllm_engine import max_len_refusal
from ..plan import prompt_bound
from .registry import Context, rule


def kv_bytes_per_token(cfg, model: dict) -> int | None:
    """KV cache bytes per token on one of the launch's vLLM GPUs: the vLLM model's own figure
    (memory.vllm.vllm_kv_bytes_per_token: the KV cache dtype, fp8 included, over the TP ranks); None if the
    config.json is unreadable."""
    try:
        return int(vllm_kv_bytes_per_token(cfg, Arch.from_config(model)))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


@rule(
    'length.truncation',
    'length.completion',
    'length.vllm-exceeds-model',
    'length.vllm-unset',
    'length.max-model-len',
    'length.completion-exceeds-context',
    'length.prompt-fills-context',
    'length.completion-capped',
    'length.max-length-unset',
)
def length_rules(ctx: Context) -> list[Finding]:
    """Prompt/completion lengths against the vLLM context: vLLM refuses a max_model_len over the model's
    (vllm/config/model.py); ms-swift caps completions at max_model_len - prompt
    (swift/infer_engine/infer_engine.py ``set_default_max_tokens``) and needs truncation left/delete
    (swift/arguments/rlhf_args.py ``_init_grpo``)."""
    cfg = ctx.cfg
    out = []
    model_max = model_max_len(ctx.model)
    if cfg.truncation_strategy not in ('left', 'delete'):
        out.append(
            Finding(
                ERROR,
                'length.truncation',
                ['truncation_strategy'],
                f"GRPO requires `truncation_strategy 'left' or 'delete'`, Current value: "
                f"`truncation_strategy='{cfg.truncation_strategy}'`.",
                'truncation_strategy: delete (after filtering the data with grpo-data filter) or left',
                'swift/arguments/rlhf_args.py::_init_grpo',
            )
        )
    if cfg.max_completion_length is not None and cfg.max_completion_length < 1:
        out.append(
            Finding(
                ERROR,
                'length.completion',
                ['max_completion_length'],
                'max_completion_length must be >= 1',
                'max_completion_length: 1024',
            )
        )
        return out
    vllm_len = cfg.vllm_max_model_len
    why = f"max_position_embeddings={model_max} in model's config.json"
    refusal = max_len_refusal(vllm_len, model_max, why) if cfg.use_vllm else None
    if refusal:
        out.append(
            Finding(
                ERROR,
                'length.vllm-exceeds-model',
                ['vllm_max_model_len'],
                f'{refusal} [vLLM, at engine start]',
                f'vllm_max_model_len: {model_max} or less',
                'vllm/config/model.py',
            )
        )
    if cfg.rollout_mode == 'colocate' and vllm_len is None:
        msg = f"{ctx.launch.name('vllm_max_model_len')} is unset: the trainer passes the model's full context"
        if model_max:
            msg += f' ({model_max} tokens)'
            kvb = kv_bytes_per_token(cfg, ctx.model or {})
            if kvb:
                msg += (
                    f'; vLLM must then fit one {model_max}-token sequence in its KV cache '
                    f'({kvb * model_max / 2**30:.2f} GiB at {kvb // 1024} KiB/token) and sizes its '
                    f'profiling run for it'
                )
        need = (cfg.max_length or 0) + (cfg.max_completion_length or 0)
        out.append(
            Finding(
                WARNING,
                'length.vllm-unset',
                ['vllm_max_model_len'],
                msg,
                f'vllm_max_model_len: {need}'
                if cfg.max_length
                else (
                    f'vllm_max_model_len: <your longest prompt> + {cfg.max_completion_length} (grpo-data stats '
                    f'gives the prompt length)'
                    if not ctx.launch.fw.prompt_limit
                    else 'vllm_max_model_len: max_length + max_completion_length'
                ),
            )
        )
    if cfg.use_vllm and cfg.max_model_len is not None and vllm_len is None:
        out.append(
            Finding(
                WARNING,
                'length.max-model-len',
                ['max_model_len'],
                f'max_model_len ({cfg.max_model_len}) is a model argument (context/RoPE override), not '
                f"vLLM's; before ms-swift 3.8 it meant vLLM",
                f'vllm_max_model_len: {cfg.max_model_len}',
            )
        )
    out += _completion_room(ctx, model_max)
    if cfg.max_length is None and cfg.rlhf_type == 'grpo' and ctx.launch.fw.prompt_limit:
        out.append(
            Finding(
                INFO,
                'length.max-length-unset',
                ['max_length'],
                f'max_length (the GRPO prompt limit) is unset, so it is the model context'
                f'{f" ({model_max})" if model_max else ""}; over-long prompts are not caught',
                'max_length: from `grpo-data stats --coverage 0.99`, then `grpo-data filter`',
            )
        )
    return out


def _completion_room(ctx: Context, model_max: int | None) -> list[Finding]:
    """The room vLLM's max_model_len leaves a completion after the longest prompt the launch lets through:
    none at all (length.completion-exceeds-context), a prompt that stops the rollout (length.prompt-fills-context),
    or completions capped at max_model_len - prompt (length.completion-capped)."""
    cfg = ctx.cfg
    out: list[Finding] = []
    vllm_len = cfg.vllm_max_model_len
    limit = vllm_len if (cfg.use_vllm and vllm_len is not None) else None
    which = "the rollout server's max_model_len" if cfg.vllm_mode == 'server' else 'vllm_max_model_len'
    C = cfg.max_completion_length
    src = 'swift/infer_engine/infer_engine.py::set_default_max_tokens'
    if limit is not None and C >= limit:
        out.append(
            Finding(
                WARNING,
                'length.completion-exceeds-context',
                ['max_completion_length', 'vllm_max_model_len'],
                f'max_completion_length ({C}) >= {which} ({limit}): no prompt leaves room for a full '
                f'completion; every completion is capped at {limit} - prompt tokens, so '
                f'max_completion_length is never reached',
                f'vllm_max_model_len: {C + (cfg.max_length or 1024)}',
                src,
            )
        )
    elif limit is not None:
        room = limit - C
        stats = ctx.data_stats if ctx.data_stats and isinstance(ctx.data_stats.get('max'), int) else None
        longest = prompt_bound(
            cfg, model_max, stats['max'] if stats else None, vllm=False, leave_room=False, clamp=cfg.max_length is None
        ).tokens
        if longest is not None and longest >= limit and stats is not None:
            out.append(
                Finding(
                    ERROR,
                    'length.prompt-fills-context',
                    ['max_length', 'vllm_max_model_len'],
                    f'the data has prompts of {stats["max"]} tokens and max_length '
                    f'{cfg.max_length or "(unset)"} lets them through; a prompt of {limit} tokens or more '
                    f'stops the rollout: "Input length (N) leaves no room for generation with max_model_len '
                    f'({limit})"',
                    f'max_length: {room} (and grpo-data filter), or vllm_max_model_len: {stats["max"] + C}',
                    src,
                )
            )
        elif longest is not None and longest > room:
            what = f'prompts of up to {longest} tokens' if stats or cfg.max_length else 'prompts'
            stop = (
                f'; a prompt of {limit}+ tokens would stop the rollout ("Input length (N) leaves no room for '
                f'generation")'
                if longest >= limit
                else ''
            )
            known = stats is not None or cfg.max_length is not None  # else only the model context admits them
            trl = not ctx.launch.fw.prompt_limit
            if trl:  # TRL has no prompt limit: vLLM stops at max_model_len, and rejects a longer prompt
                stop = (
                    f'; a prompt of more than {limit} tokens stops the rollout ("The decoder prompt (length N) '
                    f'is longer than the maximum model length of {limit}")'
                    if longest > limit
                    else ''
                )
                trim = f'filter the data to prompts of <= {room} tokens (grpo-data filter --max-length {room})'
            else:
                trim = f'max_length: {room}'
            out.append(
                Finding(
                    WARNING if known else INFO,
                    'length.completion-capped',
                    ([] if trl else ['max_length']) + ['max_completion_length', 'vllm_max_model_len'],
                    f'{what} are allowed but {which} is {limit}: a prompt longer than {room} tokens gets '
                    f'its completion capped at {limit} - prompt tokens'
                    + ('' if trl else ' (ms-swift logs "max_model_len - num_tokens < max_tokens")')
                    + stop,
                    f'{trim} to keep every completion whole, or vllm_max_model_len: {longest + C}'
                    if longest + C <= (model_max or longest + C)
                    else trim,
                    'vllm/v1/engine/processor.py (prompt length check)' if trl else src,
                )
            )
    return out


def rows_over(stats: dict, limit: int) -> int:
    """Rows of a ``grpo-data stats`` histogram longer than ``limit`` (exact at bin edges, else an upper bound)."""
    hist = stats.get('histogram') or {}
    edges, counts = hist.get('edges') or [], hist.get('counts') or []
    return sum(c for lo, c in zip(edges, counts) if lo > limit) + sum(
        c for lo, hi, c in zip(edges, edges[1:], counts) if lo <= limit < hi - 1
    )


@rule('length.data-over-max-length', 'length.data-vllm-len')
def data_lengths(ctx: Context) -> list[Finding]:
    """The data's prompt lengths (``grpo-data stats``) against max_length: ms-swift truncates or resamples
    longer prompts (swift/rlhf_trainers/grpo_trainer.py, "resample: only collected X/Y valid samples")."""
    st, cfg = ctx.data_stats, ctx.cfg
    if not st or not isinstance(st.get('max'), int):
        return []
    out = []
    limit = cfg.max_length
    if limit is not None and st['max'] > limit:
        over = rows_over(st, limit)
        share = over / max(1, st.get('count', 1))
        what = (
            'cut from the left'
            if cfg.truncation_strategy == 'left'
            else 'resampled at rollout time (and after 10 failed draws per sample ms-swift stops with "resample: '
            'only collected X/Y valid samples")'
        )
        out.append(
            Finding(
                WARNING if share > 0.01 else INFO,
                'length.data-over-max-length',
                ['max_length', 'dataset'],
                f'up to {over:,} of {st.get("count", 0):,} prompts ({share:.1%}) are longer than max_length '
                f'{limit} (longest {st["max"]}); they will be {what}',
                f'grpo-data filter DATA -o KEPT --max-length {limit}, or max_length: '
                f'{st.get("max_length_for_coverage")} (covers {st.get("coverage", 0):.1%})',
            )
        )
    want = prompt_bound(cfg, None, st['max'], vllm=False).tokens + cfg.max_completion_length
    if cfg.use_vllm and (cfg.vllm_max_model_len is None or cfg.vllm_max_model_len > 2 * want):
        out.append(
            Finding(
                INFO,
                'length.data-vllm-len',
                ['vllm_max_model_len'],
                f"the data's longest prompt ({st['max']} tokens) plus max_completion_length "
                f'({cfg.max_completion_length}) needs a context of {want}; vllm_max_model_len is '
                f'{cfg.vllm_max_model_len or "the model default"}',
                f'vllm_max_model_len: {want}',
            )
        )
    return out
