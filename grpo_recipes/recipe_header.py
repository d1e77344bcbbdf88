"""The generated plan block in a recipe's header: what it was planned from, the staleness check, and a rewrite
that never drops a line it did not write.

The block (``recipes.plan_block``) holds the guard's figures. Figures alone cannot tell a stale header: another
model of the same shape, or a changed field that moves nothing shown, leaves every line as it was. So the block's
first line names what it was planned from: the model and a digest of every argument the launch reads from the
recipe (its ``ENV:`` block included) and of the header's ``@`` hardware lines. ``--check`` compares the whole block,
that line included, with the file's; ``--write`` replaces the block only when every line between its markers is
one the generator writes, and otherwise stops and names the line.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .errors import GuardError
from .recipes import META_RE, PLAN_BEGIN, PLAN_END

INPUTS_PREFIX = '# planned from:'
GENERATED = (INPUTS_PREFIX, '# hardware:', '# batch:', '# lengths:', '# GPU ', '#   vLLM KV', '# speed (predicted')
"""Every line plan_block writes starts with one of these (recipes.plan_block)."""


def inputs_line(recipe, report) -> str:
    """``# planned from: model M; inputs <digest>``: the digest of the recipe's arguments as ms-swift reads them
    (``read_argv``: a config file's keys, never its path), its ENV block and its ``@`` header lines (the hardware it
    is planned on)."""
    launch = report.launch
    hardware = {k: recipe.meta.get(k) for k in ('gpus', 'gpu_type', 'rollout_gpus')}
    payload = json.dumps(
        {'argv': launch.read_argv, 'env': launch.file_env, 'hardware': hardware}, sort_keys=True, default=str
    )
    digest = hashlib.sha256(payload.encode('utf-8')).hexdigest()[:16]
    model = getattr(report, 'model_name', None) or report.cfg.model
    return f'{INPUTS_PREFIX} model {model}; arguments and @hardware sha256 {digest}'


def full_block(recipe, report) -> list[str]:
    from .recipes import plan_block

    block = plan_block(report)
    return [block[0], inputs_line(recipe, report), *block[1:]]


def _span(path: Path, lines: list[str]) -> tuple[int, int] | None:
    """(begin, end) line indexes of the block, None when there is none; GuardError when the markers are broken."""
    begins = [i for i, ln in enumerate(lines) if ln == PLAN_BEGIN]
    ends = [i for i, ln in enumerate(lines) if ln == PLAN_END]
    if not begins and not ends:
        return None
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise GuardError(
            f'{path}: the plan block\'s markers are broken ({len(begins)} "{PLAN_BEGIN}", {len(ends)} '
            f'"{PLAN_END}"{", end before begin" if begins and ends and ends[0] < begins[0] else ""}); '
            f'leave one of each, in order, or delete both, then run `grpo-recipes header --write` again'
        )
    return begins[0], ends[0]


def current_block(path: Path) -> list[str] | None:
    lines = path.read_text(encoding='utf-8').splitlines()
    span = _span(path, lines)
    return None if span is None else lines[span[0] : span[1] + 1]


def is_stale(path: Path, block: list[str]) -> bool:
    try:
        return current_block(path) != block
    except GuardError:
        return True


def write_block(path: Path, block: list[str]) -> bool:
    """Replace the block (or insert it after the ``@`` lines); True if the file changed. Refuses, naming the line,
    when the old block holds a line the generator does not write (a user's note or a YAML key)."""
    lines = path.read_text(encoding='utf-8').splitlines()
    span = _span(path, lines)
    if span is None:
        last_meta = max((i for i, ln in enumerate(lines) if META_RE.match(ln)), default=-1)
        new = lines[: last_meta + 1] + block + lines[last_meta + 1 :]
    else:
        a, b = span
        for i in range(a + 1, b):
            if not lines[i].startswith(GENERATED):
                raise GuardError(
                    f'{path}:{i + 1}: {lines[i]!r} is inside the generated plan block but is not a line '
                    f'grpo-recipes writes, and --write replaces the whole block; move it above '
                    f'"{PLAN_BEGIN}" or below "{PLAN_END}", then run again'
                )
        new = lines[:a] + block + lines[b + 1 :]
    if new == lines:
        return False
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_text('\n'.join(new) + '\n', encoding='utf-8')
    tmp.replace(path)
    return True
