"""This project's own launchers (``recipes/<model>/<variant>.sh``), checked as the recipe they run.

A launcher is three lines around ``grpo_launch RECIPE.yaml "$@"`` (``scripts/launch_lib.sh``): it has no
``swift rlhf`` command of its own to read. ``launch_lib.sh`` runs ``grpo-guard check RECIPE --gpus G --gpu-type T
[--rollout "CUDA_VISIBLE_DEVICES=R swift rollout ..."] -- --model M ...`` with G, T and R from the environment
(``GPUS``, ``GPU_TYPE``, ``ROLLOUT_GPUS``) or else the recipe header, M from ``MODEL`` or else the recipe, and
``TRAIN_GPUS`` turned into ``CUDA_VISIBLE_DEVICES`` and ``NPROC_PER_NODE``. :func:`recipe_launcher` finds the
recipe and :meth:`RecipeLauncher.check_args` rebuilds that same check, so ``grpo-guard check launcher.sh``
judges what the launcher will judge. Nothing is run.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from .errors import GuardError
from .frontends.shell_expand import expand, unresolved

_CALL = re.compile(r'^\s*grpo_launch\s+(.*)$')
LAUNCHER_ENV = ('MODEL', 'TRAIN_GPUS', 'GPUS', 'GPU_TYPE', 'ROLLOUT_GPUS', 'ROLLOUT_HOST', 'NNODES', 'RECIPE')
"""The environment variables of scripts/launch_lib.sh that change what its guard step checks."""


@dataclass
class RecipeLauncher:
    script: Path
    line: int
    """Line of the ``grpo_launch`` call."""
    recipe: Path
    environ: dict = field(default_factory=dict)

    def check_args(self, gpus: int | None, gpu_type: str | None, rollout: str | None) -> dict:
        """What launch_lib.sh's guard step passes: the launch's args, its environment, the hardware, the rollout
        command, and a note saying how it was read."""
        from .config import GRPOConfig
        from .frontends import read_launch as load_launch
        from .recipes import read_meta

        meta = read_meta(self.recipe)
        env = dict(self.environ)
        train = env.get('TRAIN_GPUS')
        if train:
            env['CUDA_VISIBLE_DEVICES'] = train
            env['NPROC_PER_NODE'] = str(len(train.split(',')))
        extra = ['--model', env['MODEL']] if env.get('MODEL') else []
        hw_source = 'flags'
        if gpus is None:
            hw_source = 'GPUS/GPU_TYPE' if env.get('GPUS') else 'recipe header'
            raw = env.get('GPUS') or meta.get('gpus')
            try:
                gpus = int(raw) if raw else None
            except ValueError:
                raise GuardError(f'{self.script}: GPUS={raw!r} is not a number of GPUs') from None
        gpu_type = gpu_type or env.get('GPU_TYPE') or meta.get('gpu_type')
        command = meta.get('command', '').split()  # `@command: megatron rlhf`: launch_lib.sh runs the YAML with it
        base = load_launch([*command, str(self.recipe), *extra], environ=env)
        cfg = None if command else GRPOConfig.from_argv(base.argv)[0]
        if rollout is None and cfg is not None and cfg.rollout_mode == 'server':
            from .recipes import rollout_argv

            if env.get('ROLLOUT_HOST'):
                extra += ['--vllm_server_host', env['ROLLOUT_HOST']]
            cmd = ['swift', 'rollout', '--model', str(cfg.model), *(rollout_argv(cfg) or [])]
            rgpus = env.get('ROLLOUT_GPUS') or meta.get('rollout_gpus')
            nnodes = str(env.get('NNODES') or base.env.get('NNODES') or '')  # launch_lib: NNODES, else ENV.NNODES
            if rgpus and not (nnodes and nnodes.isdigit() and int(nnodes) > 1):
                cmd = [f'CUDA_VISIBLE_DEVICES={rgpus}', *cmd]
            rollout = shlex.join(cmd)
        used = [k for k in LAUNCHER_ENV if self.environ.get(k)]
        note = (
            f'{self.script}:{self.line} is a recipe launcher: checked as the recipe it runs ({self.recipe}), '
            f"with the launcher's environment ({', '.join(used) or 'none set'}) and, where that sets none, the "
            f"recipe header's hardware, as scripts/launch_lib.sh runs its guard step"
        )
        return {
            'args': [*command, str(self.recipe), *extra],
            'environ': env,
            'gpus': gpus,
            'gpu_type': gpu_type,
            'hw_source': hw_source,
            'rollout': rollout,
            'note': note,
        }


def recipe_launcher(path: str | None, environ: Mapping[str, str]) -> RecipeLauncher | None:
    """The recipe a launcher script runs through ``grpo_launch``, or None when the script is not one."""
    if not path or not path.endswith('.sh'):
        return None
    p = Path(path)
    try:
        text = p.read_text(encoding='utf-8')
    except (OSError, UnicodeDecodeError):
        return None  # the script reader reports it
    for n, line in enumerate(text.splitlines(), 1):
        m = _CALL.match(line)
        if not m:
            continue
        try:
            words = shlex.split(m.group(1), comments=True)
        except ValueError as e:
            raise GuardError(f'{p}:{n}: cannot read the grpo_launch line ({e})') from None
        if not words:
            raise GuardError(f'{p}:{n}: grpo_launch without a recipe; it takes RECIPE.yaml first')
        # launchers set HERE to their own directory (HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)")
        resolved = expand(words[0], {**environ, 'HERE': str(p.resolve().parent)})
        if unresolved(resolved):
            raise GuardError(
                f'{p}:{n}: cannot tell which recipe `grpo_launch {words[0]}` runs (a variable that is '
                f'not set); check the recipe YAML itself: grpo-guard check RECIPE.yaml'
            )
        recipe = Path(resolved)
        if not recipe.is_file():
            raise GuardError(f'{p}:{n}: the recipe {recipe} that grpo_launch runs does not exist')
        env = dict(environ)
        return RecipeLauncher(script=p, line=n, recipe=recipe, environ=env)
    return None
