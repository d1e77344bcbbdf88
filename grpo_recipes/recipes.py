"""The recipe catalogue: ``recipes/<model>/<variant>.yaml`` (+ ``.sh`` launcher).

A recipe is an ms-swift 4.6 config that ``swift rlhf recipe.yaml`` reads as is. Facts the config
cannot hold (the hardware it is planned for, the levels of validation it has passed) live in
machine-readable header comments, and the human-readable plan summary between the
``# --- plan`` markers is written by ``grpo-recipes header --write`` from the guard itself::

    # @gpus: 2
    # @gpu_type: A100-80G
    # @rollout_gpus: 1            (server mode: the GPU ids of `swift rollout`)
    # @validation: parsed guard cpu-e2e
    # @command: megatron rlhf     (the command that runs the YAML; none: `swift rlhf`)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import GuardError

META_RE = re.compile(r'^#\s*@(\w+):\s*(.*?)\s*$')
LEVELS = ('parsed', 'snapshot', 'guard', 'cpu-e2e', 'gpu-run')
LEVEL_TEXT = {
    'parsed': 'parsed by the real ms-swift 4.6',
    'snapshot': "arguments read against the release's argument snapshot (Megatron needs GPUs: no CPU run)",
    'guard': 'guard plan within 75-90%',
    'cpu-e2e': 'CPU end-to-end run (2 steps, tiny model)',
    'gpu-run': 'GPU run',
}
LEVEL_CODE = {'parsed': 'P', 'snapshot': 'S', 'guard': 'G', 'cpu-e2e': 'C', 'gpu-run': 'R'}
PLAN_BEGIN = '# --- plan (grpo-recipes header --write; do not edit by hand)'
PLAN_END = '# --- end plan'


def recipes_root() -> Path:
    env = os.environ.get('GRPO_RECIPES_DIR')
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent.parent / 'recipes'
    return here


@dataclass
class Recipe:
    name: str
    """``<model>/<variant>``."""
    path: Path
    meta: dict = field(default_factory=dict)

    @property
    def launcher(self) -> Path:
        return self.path.with_suffix('.sh')

    @property
    def gpus(self) -> int:
        return int(self.meta.get('gpus', 0))

    @property
    def gpu_type(self) -> str | None:
        return self.meta.get('gpu_type')

    @property
    def rollout_gpus(self) -> str | None:
        return self.meta.get('rollout_gpus')

    @property
    def validation(self) -> list[str]:
        return self.meta.get('validation', '').split()

    @property
    def command(self) -> list[str]:
        """The command that runs the YAML (``@command: megatron rlhf``); [] for ``swift rlhf RECIPE.yaml``, which
        the guard reads from the YAML alone."""
        return self.meta.get('command', '').split()

    def launch_argv(self, extra: list[str] | None = None) -> list[str]:
        """What the guard reads for this recipe: its command, the YAML, then ``extra`` arguments."""
        return [*self.command, str(self.path), *(extra or [])]


def read_meta(path: Path) -> dict:
    meta = {}
    try:
        text = path.read_text(encoding='utf-8')
    except UnicodeDecodeError as e:
        raise GuardError(f'{path}: not valid UTF-8 at byte {e.start}; save the file as UTF-8') from None
    for line in text.splitlines():
        if not line.startswith('#'):
            if line.strip():
                break
            continue
        m = META_RE.match(line)
        if m:
            meta[m.group(1)] = m.group(2)
    return meta


def discover(root: Path | None = None) -> list[Recipe]:
    root = root or recipes_root()
    out = []
    for path in sorted(root.glob('*/*.yaml')):
        if path.parent.name == 'examples' or path.name.endswith('.rollout.yaml'):
            continue
        out.append(Recipe(name=f'{path.parent.name}/{path.stem}', path=path, meta=read_meta(path)))
    return out


def find(name_or_path: str) -> Recipe:
    p = Path(name_or_path)
    if p.suffix in ('.yaml', '.yml') and p.is_file():
        return Recipe(name=f'{p.parent.name}/{p.stem}', path=p, meta=read_meta(p))
    recipes = discover()
    matches = [r for r in recipes if r.name == name_or_path or r.name.endswith('/' + name_or_path)]
    if len(matches) == 1:
        return matches[0]
    names = ', '.join(r.name for r in recipes)
    if not matches:
        raise GuardError(f'no recipe named {name_or_path!r}; `grpo-recipes ls` lists them: {names}')
    raise GuardError(f'{name_or_path!r} matches several recipes: {", ".join(r.name for r in matches)}')


def eval_batch(cfg, plan) -> str:
    """The eval batch as ms-swift forms it (``per_device_eval_batch_size`` x processes completions, in groups of
    ``num_generations_eval``, else ``num_generations``: rlhf_trainers/args_mixin.py); empty without an eval."""
    if cfg.eval_strategy in (None, 'no'):
        return ''
    ge = cfg.num_generations_eval or cfg.num_generations
    total = cfg.per_device_eval_batch_size * plan.world_size
    return (
        f'; eval every {cfg.eval_steps:g} steps: {cfg.per_device_eval_batch_size}/GPU = {total} completions = '
        f'{total / ge:g} prompts x {ge}'
    )


def plan_block(report) -> list[str]:
    """The human-readable plan summary written into a recipe's header (a front end with its own plan writes its
    own lines: ``report.plan_lines()``)."""
    if hasattr(report, 'plan_lines'):
        return [PLAN_BEGIN, *report.plan_lines(), PLAN_END]
    cfg, plan = report.cfg, report.plan
    lines = [PLAN_BEGIN]
    hw = report.hardware
    lines.append(
        f'# hardware: {hw.gpus}x {hw.gpu_type}; world {plan.world_size}; vLLM '
        f'{cfg.vllm_mode} TP {cfg.vllm_tensor_parallel_size}, util {cfg.vllm_gpu_memory_utilization}, '
        f'sleep {cfg.effective_sleep_level}'
    )
    lines.append(
        f'# batch: {cfg.per_device_train_batch_size}/GPU x GA {cfg.gradient_accumulation_steps} = '
        f'{plan.optimizer_batch} completions = {plan.prompts_per_optimizer_step:g} prompts x '
        f'{cfg.num_generations} per step' + eval_batch(cfg, plan)
    )
    lines.append(
        f'# lengths: prompt <= {cfg.max_length} (grpo-data stats, GSM8K p99.9 = 216), completion <= '
        f'{cfg.max_completion_length}, vllm_max_model_len {cfg.vllm_max_model_len}'
    )
    groups: dict = {}
    for m in report.memory:
        groups.setdefault((m.role, m.total_gib, m.phase), []).append(m.gpu)
    for (role, total, phase), ids in groups.items():
        m = next(x for x in report.memory if x.gpu == ids[0] and x.role == role)
        top = ', '.join(f'{k} {v:.1f}' for k, v in list(m.phase_terms.items())[:4])
        lines.append(
            f'# GPU {",".join(ids)} ({role}): peak {total:.1f} of {m.capacity_gib:.1f} GiB '
            f'({m.peak_fraction:.0%}, headroom {m.headroom_pct:.0f}%) in {phase}: {top}'
        )
        if m.vllm.get('kv_tokens'):
            lines.append(
                f'#   vLLM KV {m.vllm["kv_cache_gib"]:.1f} GiB = {m.vllm["kv_tokens"]:,} tokens; a rollout '
                f'needs {m.vllm.get("rollout_tokens", 0):,}'
            )
    from .speed.report import header_line  # the predicted step time (docs/throughput.md)

    speed = header_line(report)
    if speed:
        lines.append(speed)
    lines.append(PLAN_END)
    return lines


def rollout_argv(cfg) -> list[str] | None:
    """`swift rollout` arguments that mirror a server-mode recipe's vLLM settings (None: not server mode)."""
    if not (cfg.rollout_mode == 'server'):
        return None
    args = [
        '--vllm_tensor_parallel_size',
        str(cfg.vllm_tensor_parallel_size),
        '--vllm_data_parallel_size',
        str(cfg.vllm_data_parallel_size),
        '--vllm_gpu_memory_utilization',
        str(cfg.vllm_gpu_memory_utilization),
        '--port',
        str((cfg.vllm_server_port or [8000])[0]),
    ]
    if cfg.vllm_max_model_len:
        args += ['--vllm_max_model_len', str(cfg.vllm_max_model_len)]
    if cfg.vllm_enable_lora:
        args += ['--vllm_enable_lora', 'true', '--vllm_max_lora_rank', str(cfg.lora_rank)]
    return args
