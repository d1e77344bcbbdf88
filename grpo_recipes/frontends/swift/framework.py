"""ms-swift (``swift rlhf``, ``swift rollout``) as the shared pipeline sees it: its facts and hooks
(:class:`grpo_recipes.framework.Framework`, registered in ``frontends/__init__.py``)."""

from __future__ import annotations

import re
from dataclasses import replace

from ...framework import Framework

HERE = __name__
CHECKS = 'grpo_recipes.frontends.swift.checks'
# ms-swift release from which set_expandable_segments guards the colocated engine (swift/rlhf_trainers/utils.py;
# the vllm.expandable-segments rule, memory/envfix.py)
TOGGLES_FROM = (4, 6)


def read_config(launch, packages: dict):
    """(the typed config, what ms-swift's parser left over, the launch with the notes reading it made: a copy),
    by the ms-swift release the user runs (3.x or 4.x)."""
    from ...errors import GuardError, InvalidLaunch
    from ...swift_args import ArgumentError
    from ..cluster import check_placeholders  # <DATA_PATH> the parser accepts: exit 2, fill it in
    from ..shell_expand import neutral_stand_ins, unresolved_message
    from .versions import config_from_argv

    argv, stood = neutral_stand_ins(launch.argv, str(launch.config_file))  # --port $RANDOM_PORT
    try:
        cfg, remaining, notes = config_from_argv(argv, packages.get('ms-swift'))
        check_placeholders(launch.argv, str(launch.config_file))
        known = list(launch.notes)
        known.extend(n for n in [*notes, *stood] if n not in known)
        return cfg, remaining, replace(launch, notes=known)
    except ArgumentError as e:
        why = unresolved_message(launch.argv, str(launch.config_file), str(e))
        if why is not None:
            raise GuardError(why) from None
        hint = ''
        if re.search(r"'<[^'>]*>'", str(e)):
            hint = ' (a <...> placeholder left from an example script: put the real value there)'
        hint += _defaults_hint(launch)
        glob = next((n for n in launch.notes if 'matches no file here' in n), None)
        if glob and 'expected at least one argument' in str(e):  # an array built from files that are not here
            hint += (
                f'; the script builds arguments from files that are not here ({glob}): run the guard where the data is'
            )
        raise InvalidLaunch(f'{launch.config_file}: swift rlhf rejects the arguments: {e}{hint}') from None


def _defaults_hint(launch) -> str:
    """Where the launch took defaults of variables set nowhere here (frontends._from_script's note): they may be
    why an argument is empty."""
    from .. import DEFAULTS_TAKEN

    said = next((n for n in launch.notes if DEFAULTS_TAKEN in n), None)
    return f' ({said.split(": ", 1)[1]})' if said else ''


def post_read(cfg, launch, packages: dict):
    """ms-swift < 3.6: vLLM inside the trainer (versions.py ``in_trainer_vllm``)."""
    from .versions import in_trainer_vllm

    return in_trainer_vllm(cfg, launch, packages.get('ms-swift'))


def render_fixes(report) -> None:
    """A command line's fixes as ``--key value`` flags (the memory fix with what it changes); a config file's stay
    YAML keys."""
    from ...fix_syntax import syntax_of
    from .wording import swift_cli_fix, swift_flags

    if syntax_of(report.launch)[0] != 'flags':
        return
    report.findings = [
        replace(
            f,
            fix=swift_cli_fix(report.fixes[0], report.launch)
            if f.rule == 'memory.fix' and report.fixes
            else swift_flags(f.fix),
        )
        for f in report.findings
    ]


def fixed_launch(launch, fix):
    """The fix's flags after the launch's own (the later value wins in ms-swift's parser)."""
    return replace(launch, argv=launch.argv + fix.argv(), notes=list(launch.notes)), []


def fix_text(fix, launch, syntax: str, config: str | None, env: dict) -> list[str]:
    """A fix as flags on a command line, or ``in CONFIG, set:`` and the ``key: value`` lines (an ``ENV:`` line among
    them) to paste into a config file."""
    from .wording import swift_cli_fix

    if syntax == 'flags':
        text = swift_cli_fix(fix, launch)
        lines = [text] if text else []
        if env:
            lines.insert(0, ' '.join(f'{k}={v}' for k, v in env.items()) + ' before swift rlhf')
        return lines
    body = fix.yaml_lines()
    if env:
        body.insert(0, 'ENV: {' + ', '.join(f'{k}: "{v}"' for k, v in env.items()) + '}')
    if not body:
        return []
    from pathlib import Path

    return [f'in {Path(config or "the config").name}, set:\n' + '\n'.join(body)]


def server_command(model, tp: int, dp: int) -> str:
    """``swift rollout`` with tp x dp engines."""
    return f'swift rollout --model {model} ' + (
        f'--vllm_data_parallel_size {dp}' if tp == 1 else f'--vllm_tensor_parallel_size {tp}'
    )


SWIFT = Framework(
    name='swift',
    display='ms-swift',
    server='swift rollout',
    server_flag_prefix='--vllm_',
    server_unknown_source='swift/pipelines/base.py (remaining_argv)',
    server_port_source='swift/arguments/deploy_args.py (DeployArguments.port, default 8000)',
    server_gpu_check_source='swift/arguments/deploy_args.py::RolloutArguments',
    server_host_required=True,
    launcher_places_processes=False,
    prompt_limit=True,
    own_batch_source=None,
    registry_check=f'{CHECKS}:registry_check',
    requires_model_flag=True,
    checks_packages=True,
    rewards_by_name=True,
    expandable_toggle_from=TOGGLES_FROM,
    zero3_gathers_for_generation=False,
    weight_sync='batched',
    old_logps_always=True,
    # swift/model/utils.py get_default_device_map: None under ZeRO-3 or FSDP, else cuda:<local rank>
    device_map_unless='sharded',
    logits_span_prompts=True,
    missing_knobs=(),
    fix_arguments=None,
    model_hub=None,
    vllm_dtype_source=(
        'swift/rlhf_trainers/rollout_mixin.py (torch_dtype=model.model_info.torch_dtype), '
        'swift/infer_engine/vllm_engine.py (dtype=dtype_mapping[model_info.torch_dtype])'
    ),
    runnable=True,
    swift_release=True,
    shows_resolved=False,
    settings_yaml_in_config=True,
    read_config=f'{HERE}:read_config',
    post_read=f'{HERE}:post_read',
    reword=None,
    render_fixes=f'{HERE}:render_fixes',
    fixed_launch=f'{HERE}:fixed_launch',
    fix_text=f'{HERE}:fix_text',
    server_command=f'{HERE}:server_command',
    unknown_arguments=f'{CHECKS}:unknown_arguments',
    handover='grpo_recipes.frontends.swift.handover:handover',
    package='ms-swift',
    pin_release='grpo_recipes.frontends.swift.versions:checked_packages',
    validator='grpo_recipes.realparse:swift_parse',
)
