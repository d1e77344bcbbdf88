"""Fix synthesis: the smallest change set that makes a launch fit, keeping the training semantics.

Invariants of every candidate: ``num_generations`` and the prompts per optimizer step
(world x per_device_train_batch_size x gradient_accumulation_steps / num_generations) are unchanged,
and so is the rollout size. Knobs, cheapest first (the order the peers recommend, peers-and-memory.md
§F): vLLM context length from the data limits, vLLM utilisation, sleep level, micro-batch split,
gradient checkpointing, move_model_batches, offloads, ZeRO stage, vLLM TP, and last ``beta: 0``
(flagged: it drops the KL term, a change of objective). Candidates are evaluated with the pure memory
model on a modified GRPOConfig; the winner is also re-checked from its argv (and, on request, with
ms-swift's real parser).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from ..config import GRPOConfig
from ..framework import Framework, as_framework
from ..plan import build_plan, prompt_bound
from .estimate import estimate
from .inputs import Inputs

MAX_CHANGES = 3


def largest_that_fits(fits, hi: int) -> int | None:
    """Binary search the largest n in 1..hi with ``fits(n)`` (which must hold for every smaller n too); None when
    not even 1 fits."""
    if not fits(1):
        return None
    lo = 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def _training_fits(mem) -> bool:
    return all(m.peak_fraction <= 1.0 for m in mem if m.role != 'rollout')


def largest_prompt_that_fits(cfg, plan, inp: Inputs, hi: int) -> int | None:
    """The prompt length at which every training GPU still fits (None: not even 1 token)."""
    return largest_that_fits(lambda n: _training_fits(estimate(cfg, plan, replace(inp, prompt_len=n))), hi)


def largest_completion_that_fits(cfg, plan, inp: Inputs) -> int | None:
    """The completion length (every row of a micro-batch padded to it) at which every training GPU still fits
    (None: not even 1 token)."""
    return largest_that_fits(
        lambda n: _training_fits(estimate(replace(cfg, max_completion_length=n), plan, replace(inp))),
        cfg.max_completion_length,
    )


@dataclass
class Fix:
    changes: dict
    """argument -> (old value, new value)."""
    peak_fraction: float
    phase: str
    changes_semantics: bool = False
    memory: list = field(default_factory=list)
    env: dict = field(default_factory=dict)
    """Environment variable -> (old value or None, new value): the allocator setting (``envfix``)."""

    def text(self, launch) -> str:
        """The fix as the user applies it: the environment line in the launch's own form (envfix.render), then the
        arguments (``in CONFIG, set:`` and the ``key: value`` lines to paste, or the framework's flags:
        ``Framework.fix_arguments``)."""
        from ..fix_syntax import syntax_of
        from .envfix import render

        parts = [render({k: new for k, (_, new) in self.env.items()}, launch)] if self.env else []
        if self.changes:
            flags = launch.fw.fix_arguments
            parts.append(
                launch.fw.call('fix_arguments', self) if flags else self.yaml_set(syntax_of(launch)[1] or 'the config')
            )
        return '\n'.join(parts)

    def yaml_lines(self) -> list[str]:
        """The changed keys as ``key: value`` lines, as they are pasted into the config."""
        return [f'{k}: {_yaml(new)}' for k, (_, new) in self.changes.items()]

    def yaml_set(self, config: str) -> str:
        """``in CONFIG, set:`` and the lines to paste there (no diff markers, no indentation)."""
        from pathlib import Path

        return f'in {Path(config).name}, set:\n' + '\n'.join(self.yaml_lines())

    def yaml_diff(self) -> str:
        lines = []
        for k, (old, new) in self.changes.items():
            lines.append(f'- {k}: {_yaml(old)}')
            lines.append(f'+ {k}: {_yaml(new)}')
        return '\n'.join(lines)

    def argv(self) -> list[str]:
        out = []
        for k, (_, new) in self.changes.items():
            out += [f'--{k}', _yaml(new)]
        return out

    def to_dict(self) -> dict:
        return {
            'changes': {k: {'from': o, 'to': n} for k, (o, n) in self.changes.items()},
            'peak_fraction': self.peak_fraction,
            'phase': self.phase,
            'changes_semantics': self.changes_semantics,
            'yaml_diff': self.yaml_diff(),
            'env': {k: {'from': o, 'to': n} for k, (o, n) in self.env.items()},
        }


def _yaml(v) -> str:
    if v is None:
        return 'null'
    if isinstance(v, bool):
        return 'true' if v else 'false'
    return str(v)


# Trial division stops here: a cofactor left above it is taken whole (its own divisors are then not offered). Bounds
# the work on an absurd micro-batch (10**18) to a million divisions; any micro-batch a GPU can hold factorises fully.
TRIAL_DIVISION_LIMIT = 10**6


def _factorise(n: int) -> dict[int, int]:
    out: dict[int, int] = {}
    d = 2
    while d * d <= n and d <= TRIAL_DIVISION_LIMIT:
        while n % d == 0:
            out[d] = out.get(d, 0) + 1
            n //= d
        d += 1 if d == 2 else 2
    if n > 1:
        out[n] = out.get(n, 0) + 1
    return out


def split_sizes(bs: int) -> list[int]:
    """Smaller micro-batches that divide ``bs`` (so the accumulation grows by a whole factor), largest first: for each
    power of two below ``bs``, the largest divisor at most that power. O(log bs) candidates from the factorisation,
    instead of every number below ``bs``; for a power-of-two ``bs`` these are all its halvings."""
    if bs <= 1:
        return []
    divisors = [1]
    for p, e in _factorise(bs).items():
        divisors = [d * p**i for d in divisors for i in range(e + 1)]
    divisors = sorted(d for d in divisors if d < bs)
    out: set[int] = set()
    for k in range(bs.bit_length()):
        below = [d for d in divisors if d <= 2**k]
        if below:
            out.add(below[-1])
    return sorted(out, reverse=True)


def _knobs(
    cfg: GRPOConfig, world: int, heads: int, prompt_len: int, framework: Framework | str = 'swift', adamw: str = 'fused'
) -> list[list[dict]]:
    """Each knob: a list of alternative change dicts (argument -> new value). A TRL launch gets only the knobs
    TRL or accelerate has a setting for. A foreach AdamW step gets the fused one first: the same update
    (torch.optim.AdamW fused=True), without the step's copy of the second moments."""
    knobs = _all_knobs(cfg, world, heads, prompt_len)
    if adamw == 'foreach':
        knobs.insert(0, [{'optim': 'adamw_torch_fused'}])
    missing = set(as_framework(framework).missing_knobs)  # settings the framework does not have
    if missing:
        knobs = [[c for c in alts if not set(c) & missing] for alts in knobs]
        knobs = [alts for alts in knobs if alts]
    return knobs


def _all_knobs(cfg: GRPOConfig, world: int, heads: int, prompt_len: int) -> list[list[dict]]:
    knobs: list[list[dict]] = []
    colocate = cfg.rollout_mode == 'colocate'
    if colocate:  # in server mode the trainer's vLLM settings are ignored: they cannot move a training GPU
        want = prompt_len + cfg.max_completion_length
        if cfg.vllm_max_model_len is None or cfg.vllm_max_model_len > want:
            knobs.append([{'vllm_max_model_len': want}])
    if colocate:
        # lower frees room for training; higher is the cure when the KV cache cannot hold a sequence
        utils = [
            u
            for u in (0.7, 0.6, 0.5, 0.45, 0.4, 0.35, 0.3, 0.25, 0.2, 0.8, 0.9)
            if abs(u - cfg.vllm_gpu_memory_utilization) > 1e-9
        ]
        if utils:
            knobs.append([{'vllm_gpu_memory_utilization': u} for u in utils])
        if cfg.sleep_level < 1:
            knobs.append([{'sleep_level': 1}])
    bs = cfg.per_device_train_batch_size
    splits = []
    for new_bs in split_sizes(bs):
        k = bs // new_bs
        ch = {'per_device_train_batch_size': new_bs, 'gradient_accumulation_steps': cfg.gradient_accumulation_steps * k}
        if cfg.steps_per_generation is not None:
            ch['steps_per_generation'] = cfg.steps_per_generation * k
        splits.append(ch)
    if splits:
        knobs.append(splits)
    if not cfg.gradient_checkpointing:
        knobs.append([{'gradient_checkpointing': True}])
    stage = cfg.zero_stage
    if not cfg.use_vllm and stage == 3 and cfg.ds3_gather_for_generation:
        # HF generation gathers the whole model on each rank (trainer.zero3_generation_gather); without it each
        # layer is fetched as the forward reaches it (slower generation, same training)
        knobs.append([{'ds3_gather_for_generation': False}])
    if cfg.use_vllm and stage == 3 and not cfg.move_model_batches:
        knobs.append([{'move_model_batches': 8}])
    if colocate and not (cfg.offload_model and cfg.offload_optimizer):
        knobs.append([{'offload_model': True, 'offload_optimizer': True}])
    if world > 1 and (stage is None or stage < 3) and (cfg.deepspeed is None or cfg.zero_stage is not None):
        opts = [{'deepspeed': 'zero3'}, {'deepspeed': 'zero3_offload'}]
        if stage is None or stage < 2:
            opts.insert(0, {'deepspeed': 'zero2'})
        knobs.append(opts)
    elif stage == 3 and not (cfg.deepspeed or '').startswith('zero3_offload'):
        knobs.append([{'deepspeed': 'zero3_offload'}])
    if colocate:
        tps = [t for t in (2, 4, 8) if t > cfg.vllm_tensor_parallel_size and world % t == 0 and heads % t == 0]
        if tps:
            knobs.append([{'vllm_tensor_parallel_size': t} for t in tps])
    if not cfg.is_lora and cfg.beta != 0:
        knobs.append([{'beta': 0.0}])
    return knobs


def _apply(cfg: GRPOConfig, change: dict) -> GRPOConfig:
    return replace(cfg, **change, explicit=cfg.explicit | frozenset(change))


def search_fixes(report, inp: Inputs, limit: int = 3) -> list[Fix]:
    cfg, plan = report.cfg, report.plan
    prompt_len = inp.prompt_len or prompt_bound(cfg, None, vllm=False).tokens or 0
    knobs = _knobs(cfg, plan.world_size, inp.arch.heads, prompt_len, report.launch.fw, inp.adamw)
    from .envfix import ENV_KEY, candidate, with_env

    env_fix = candidate(report)
    if env_fix is not None:  # the allocator setting first: it changes no training setting
        knobs.insert(0, [{ENV_KEY + env_fix[0]: env_fix[1]}])
    found: list[tuple[tuple, Fix]] = []
    for n in range(1, MAX_CHANGES + 1):
        for idxs in itertools.combinations(range(len(knobs)), n):
            for choice in itertools.product(*(knobs[i] for i in idxs)):
                change: dict = {}
                for c in choice:
                    change.update(c)
                env = {k[len(ENV_KEY) :]: v for k, v in change.items() if k.startswith(ENV_KEY)}
                change = {k: v for k, v in change.items() if not k.startswith(ENV_KEY)}
                new = _apply(cfg, change)
                new_plan = build_plan(new, report.launch.env, report.hardware)
                cand = replace(inp, adamw='fused') if 'optim' in change else replace(inp)
                mem = estimate(new, new_plan, with_env(cand, report, new, env))  # the allocator follows the new config
                # only the training GPUs: no trainer setting moves a rollout server's GPU; m.fits already requires no
                # error-level problem (vLLM starts, holds one sequence)
                if not all(m.fits for m in mem if m.role != 'rollout'):
                    continue
                peak = max(m.peak_fraction for m in mem if m.role != 'rollout')
                semantic = 'beta' in change
                # a fix that leaves vLLM's KV cache room for the whole rollout ranks first; one where vLLM queues part
                # of it (vllm.kv-concurrency: slower, same memory) still fits, and is the only kind there is when the
                # rollout's longest sequences cannot all be held at once (e.g. prompts bounded only by the context)
                queued = any(m.problems for m in mem if m.role != 'rollout')
                cost = (semantic, queued, peak > 0.9, n, sum(idxs), -peak)
                fix = Fix(
                    {k: (getattr(cfg, k), v) for k, v in change.items()},
                    round(peak, 4),
                    max((m for m in mem if m.role != 'rollout'), key=lambda m: m.peak_fraction).phase,
                    semantic,
                    mem,
                    {
                        k: ((report.launch.alloc.values if report.launch.alloc else {}).get(k), v)
                        for k, v in env.items()
                    },
                )
                found.append((cost, fix))
        if any(not c[0][0] and not c[0][1] and not c[0][2] for c in found):
            break
    found.sort(key=lambda cf: cf[0])
    out, seen = [], set()
    for _, fix in found:
        key = tuple(sorted(fix.changes)) + tuple(sorted(fix.env))
        if key in seen:
            continue
        seen.add(key)
        out.append(fix)
        if len(out) >= limit:
            break
    return out
