"""``--fastest``: the configurations that fit, ranked by predicted seconds per prompt.

Knobs (every candidate keeps num_generations and the prompts per optimizer step): the micro-batch split
(per_device_train_batch_size x gradient_accumulation_steps), the rollout's place (vLLM colocated on the training GPUs,
or a rollout server on k of the node's GPUs with the rest training), vLLM's tensor parallelism (colocate), gradient
checkpointing and vLLM's sleep level. A candidate fits when the memory model (memory.estimate, the fit test
memory/search.py applies) puts every GPU within its capacity with no vLLM start-up problem, and the check would not call
it tight (memory.verdicts.MODEL_ERROR of headroom on the trainer's terms). Each is written as the launch's own fix
lines (fix_syntax), with why the winner wins.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from ..memory.search import Fix
from ..plan import build_plan
from .model import predict

TOP = 3
# In server mode these are the rollout server's (on its command), not the trainer's (ms-swift logs them as ignored)
SERVER_SIDE = ('vllm_tensor_parallel_size', 'vllm_data_parallel_size', 'vllm_gpu_memory_utilization', 'sleep_level')
PHASE_WORDS = {
    'rollout': 'rollout',
    'logprobs': 'log-prob passes',
    'train': 'forward+backward',
    'weight_sync': 'weight sync and sleep/wake',
    'other': 'optimizer and collectives',
}


@dataclass
class Candidate:
    changes: dict
    """argument -> (old, new)."""
    env: dict = field(default_factory=dict)
    """Environment of the training command: NPROC_PER_NODE, CUDA_VISIBLE_DEVICES (server layouts)."""
    rollout: str | None = None
    """The rollout server's command (server layouts)."""
    step_seconds: float = 0.0
    step_low: float = 0.0
    step_high: float = 0.0
    seconds_per_prompt: float = 0.0
    peak_fraction: float = 0.0
    phases: dict = field(default_factory=dict)
    text: str = ''
    why: str = ''

    def to_dict(self) -> dict:
        return {
            'changes': {k: {'from': o, 'to': n} for k, (o, n) in self.changes.items()},
            'env': self.env,
            'rollout': self.rollout,
            'step_seconds': self.step_seconds,
            'step_seconds_low': self.step_low,
            'step_seconds_high': self.step_high,
            'seconds_per_prompt': self.seconds_per_prompt,
            'peak_fraction': self.peak_fraction,
            'phases': self.phases,
            'fix': self.text,
            'why': self.why,
        }


@dataclass
class Ranking:
    current_seconds_per_prompt: float
    candidates: list = field(default_factory=list)
    searched: int = 0
    fitted: int = 0

    def to_dict(self) -> dict:
        return {
            'current_seconds_per_prompt': self.current_seconds_per_prompt,
            'searched': self.searched,
            'fit': self.fitted,
            'candidates': [c.to_dict() for c in self.candidates],
        }

    def lines(self) -> list[str]:
        out = [
            f'Fastest configurations that fit ({self.fitted} of {self.searched} searched fit; the launch as '
            f'written: {self.current_seconds_per_prompt:.2f} s per prompt):'
        ]
        if not self.candidates:
            out.append('  none of the searched changes fits and is faster')
        for i, c in enumerate(self.candidates, 1):
            out.append(
                f'  {i}. {c.seconds_per_prompt:.2f} s per prompt ({c.step_seconds:.1f} s per step, band '
                f'{c.step_low:.1f}-{c.step_high:.1f}; peak {c.peak_fraction:.0%} of the GPU): {c.why}'
            )
            out += ['     ' + ln for ln in c.text.splitlines()]
        return out


def _splits(cfg) -> list[dict]:
    """Micro-batch x accumulation with the same product (completions per process per optimizer step)."""
    bs, ga = cfg.per_device_train_batch_size, cfg.gradient_accumulation_steps or 1
    total = bs * ga
    out = []
    for new_bs in range(1, min(total, 64) + 1):  # bounded: a micro-batch over 64 is not searched
        if total % new_bs or new_bs == bs:
            continue
        ch = {'per_device_train_batch_size': new_bs, 'gradient_accumulation_steps': total // new_bs}
        if cfg.steps_per_generation is not None:
            ch['steps_per_generation'] = max(1, cfg.steps_per_generation * bs * (total // new_bs) // total)
        out.append(ch)
    return out


def _layouts(report, heads: int) -> list[tuple[dict, dict, str | None, object]]:
    """(config changes, env, rollout command, hardware) for each place the rollout can run on this node."""
    cfg, plan, hw, launch = report.cfg, report.plan, report.hardware, report.launch
    out = []
    world = plan.world_size
    if plan.nnodes > 1:
        return out  # multi-node layouts are left as written
    if cfg.rollout_mode == 'colocate':
        for tp in (1, 2, 4, 8):
            if tp != cfg.vllm_tensor_parallel_size and world % tp == 0 and heads % tp == 0:
                out.append(({'vllm_tensor_parallel_size': tp}, {}, None, hw))
    elif not cfg.use_vllm and plan.world_size:  # HF generate -> vLLM on the training GPUs
        out.append(
            (
                {'use_vllm': True, 'vllm_mode': 'colocate', 'vllm_gpu_memory_utilization': 0.5, 'sleep_level': 1},
                {},
                None,
                hw,
            )
        )
    total = hw.gpus or (world + (len(plan.rollout_gpus or []) if cfg.vllm_mode == 'server' else 0))
    opt = plan.optimizer_batch
    for k in (1, 2, 4):
        train = total - k
        if train < 1 or (cfg.vllm_mode == 'server' and k == len(plan.rollout_gpus or [])):
            continue
        per_proc = opt / train
        if per_proc != int(per_proc):
            continue  # the prompts per step cannot be kept
        per_proc = int(per_proc)
        bs = next((b for b in (cfg.per_device_train_batch_size, 8, 4, 2, 1) if b <= per_proc and per_proc % b == 0), 1)
        ch = {
            'use_vllm': True,
            'vllm_mode': 'server',
            'vllm_server_host': ['127.0.0.1'],
            'vllm_tensor_parallel_size': 1,
            'vllm_data_parallel_size': k,
            'vllm_gpu_memory_utilization': 0.9,
            'per_device_train_batch_size': bs,
            'gradient_accumulation_steps': per_proc // bs,
            'sleep_level': 0,
        }
        env = {'NPROC_PER_NODE': str(train), 'CUDA_VISIBLE_DEVICES': ','.join(str(i) for i in range(train))}
        rgpus = ','.join(str(i) for i in range(train, total))
        for tp, dp in ((1, k), (k, 1)) if k > 1 and heads % k == 0 else ((1, k),):  # k engines, or one TP-k engine
            serve = f'CUDA_VISIBLE_DEVICES={rgpus} ' + launch.fw.call('server_command', cfg.model, tp, dp)
            out.append(
                (
                    {**ch, 'vllm_tensor_parallel_size': tp, 'vllm_data_parallel_size': dp},
                    env,
                    serve,
                    replace(hw, rollout_gpus=tuple(range(train, total))),
                )
            )
    return out


def _render(report, changes: dict, env: dict, rollout: str | None) -> str:
    """A configuration that fits as the lines to change, in the launch's own syntax, and its rollout server."""
    from ..fix_syntax import syntax_of

    shown = {}
    server = changes.get('vllm_mode', (None, report.cfg.vllm_mode))[1] == 'server'
    for k, (old, new) in changes.items():
        if k == 'vllm_server_host' and not report.launch.fw.server_host_required:
            continue  # TRL's server_host defaults to this machine
        if server and k in SERVER_SIDE:
            continue  # the rollout server's own settings: on its command line, ignored by the trainer
        if isinstance(new, list):  # one host: a scalar reads the same for ms-swift's nargs='+' argument
            new = new[0] if len(new) == 1 else ' '.join(map(str, new))
        shown[k] = (old, new)
    fix = Fix(shown, 0.0, '')
    syntax, config = syntax_of(report.launch)
    lines = report.launch.fw.call('fix_text', fix, report.launch, syntax, config, env)
    if rollout:
        lines.append(f'rollout server: {rollout}')
    return '\n'.join(lines)


def _why(best: dict, base: dict) -> str:
    deltas = sorted(((base.get(k, 0) - best.get(k, 0), k) for k in set(base) | set(best)), reverse=True)
    gains = [f'{PHASE_WORDS[k]} {base.get(k, 0):.1f} -> {best.get(k, 0):.1f} s' for d, k in deltas[:2] if d > 0.05]
    return 'faster ' + '; '.join(gains) if gains else 'as fast, fits'


def _micro(c: Candidate, cfg) -> int:
    return c.changes.get('per_device_train_batch_size', (None, cfg.per_device_train_batch_size))[1]


def rank(report, speed_inp, model_config: dict | None, data_stats: dict | None = None, top: int = TOP) -> Ranking:
    """Every combination of the knobs that fits, fastest per prompt first (the launch itself excluded)."""
    from ..memory.envfix import with_alloc
    from ..memory.estimate import estimate
    from ..memory.verdicts import MODEL_ERROR, _uncertain_gib, memory_inputs, prompt_bound

    cfg, launch = report.cfg, report.launch
    base = report.speed
    ranking = Ranking(current_seconds_per_prompt=base.seconds_per_prompt if base else 0.0)
    minp, _ = memory_inputs(report, model_config)
    if minp is None or report.memory_unchecked:
        return ranking
    minp = with_alloc(minp, launch.alloc, cfg, launch.framework)
    minp.prompt_len = prompt_bound(report, minp.arch, data_stats)[0]
    knobs = [
        [{}] + _splits(cfg),
        [({}, {}, None, report.hardware)] + _layouts(report, minp.arch.heads),
        [{}, {'gradient_checkpointing': not cfg.gradient_checkpointing}],
    ]
    sleeps = [{}] + [{'sleep_level': s} for s in (0, 1, 2) if s != cfg.sleep_level]
    found: dict = {}
    for split, (lay, env, serve, hw), gc, sl in itertools.product(*knobs, sleeps):
        change = {**split, **gc, **lay}
        if sl and (change.get('vllm_mode', cfg.vllm_mode) != 'colocate' or not change.get('use_vllm', cfg.use_vllm)):
            continue
        change.update(sl)
        change = {k: v for k, v in change.items() if getattr(cfg, k) != v}
        if not change:
            continue
        key = tuple(sorted((k, str(v)) for k, v in change.items()))
        if key in found:
            continue
        ranking.searched += 1
        new = replace(cfg, **change, explicit=cfg.explicit | frozenset(change))
        plan = build_plan(new, {**launch.env, **env}, hw)
        if not plan.optimizer_batch or plan.steps_per_generation is None:
            continue
        try:
            mem = estimate(new, plan, replace(minp))
        except (ValueError, ZeroDivisionError):
            continue
        if not mem or not all(
            m.fits and not [p for p in m.problems if p.get('severity', 'error') == 'error'] for m in mem
        ):
            continue
        if any(m.total_gib + MODEL_ERROR * _uncertain_gib(m) > m.capacity_gib for m in mem if m.role != 'rollout'):
            continue  # what the check would call tight (memory.tight): not offered as a speed-up
        ranking.fitted += 1
        kv = next(
            (
                m.vllm.get('kv_tokens')
                for m in mem
                if m.vllm and m.vllm.get('kv_tokens') is not None and (m.role == 'rollout' or new.vllm_mode != 'server')
            ),
            None,
        )
        tp = max(1, new.vllm_tensor_parallel_size)
        w = next((m.vllm.get('weights_gib') for m in mem if m.vllm), None)
        inp = replace(speed_inp, kv_tokens=kv, vllm_weight_bytes=w * 2**30 * tp if w else None)
        est = predict(new, plan, inp)
        peak = max(m.peak_fraction for m in mem if m.role != 'rollout')
        found[key] = Candidate(
            {k: (getattr(cfg, k), v) for k, v in change.items()},
            env,
            serve,
            est.step_seconds,
            est.step_seconds_low,
            est.step_seconds_high,
            est.seconds_per_prompt,
            round(peak, 4),
            est.phases,
        )
    # ties (the model sees no difference): fewer changes, then the larger micro-batch (kernels run fuller)
    ordered = sorted(found.values(), key=lambda c: (round(c.seconds_per_prompt, 2), len(c.changes), -_micro(c, cfg)))
    best: list[Candidate] = []
    for c in ordered:
        if base and c.seconds_per_prompt >= base.seconds_per_prompt:
            continue
        if any(abs(c.step_seconds - b.step_seconds) <= 0.005 * b.step_seconds for b in best):
            continue  # the same prediction by another route: one is enough
        c.text = _render(report, c.changes, c.env, c.rollout)
        if any(c.text == b.text for b in best):
            continue  # TRL has one sleep switch for ms-swift's two levels: the same lines
        c.why = _why(c.phases, base.phases if base else {})
        best.append(c)
        if len(best) >= top:
            break
    ranking.candidates = best
    return ranking
