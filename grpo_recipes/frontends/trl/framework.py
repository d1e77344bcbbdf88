"""TRL (``accelerate launch``/``python``/``torchrun``/``trl grpo`` running GRPOTrainer, ``trl vllm-serve``) as the
shared pipeline sees it: its facts and hooks (:class:`grpo_recipes.framework.Framework`, registered in
``frontends/__init__.py``)."""

from __future__ import annotations

from dataclasses import replace

from ...framework import Framework
from .arguments import SWIFT_ONLY

HERE = __name__
WORDING = 'grpo_recipes.frontends.trl.wording'


def read_config(launch, packages: dict):
    """(the typed config, what TrlParser left over, the launch with what reading it found: a copy), by the
    installed (or ``--trl-version``) release."""
    from ...errors import GuardError
    from ..cluster import check_placeholders  # <DATA_PATH> the parser accepts: exit 2, fill it in
    from ..shell_expand import neutral_stand_ins, unresolved_message
    from .reader import read_config as read

    argv, stood = neutral_stand_ins(launch.argv, str(launch.config_file))  # --vllm_server_port $RANDOM_PORT
    try:
        cfg, remaining, read_launch = read(replace(launch, argv=argv) if stood else launch, packages.get('trl'))
        check_placeholders(launch.argv, str(launch.config_file))
        if stood:
            read_launch = replace(read_launch, argv=launch.argv, notes=[*read_launch.notes, *stood])
        cfg, read_launch = _served_by_the_server_beside(cfg, read_launch)
        return cfg, remaining, read_launch
    except (TypeError, ValueError) as e:  # a $VAR left where TRL's field is a number
        why = unresolved_message(launch.argv, str(launch.config_file), str(e))
        if why is None:
            raise
        raise GuardError(why) from None


def _script_unread(script: str | None) -> bool:
    """The training script is not here to read (a ``.py`` file missing, or a ``-m`` module of the project), so what
    it sets in code is not known. TRL's own entry points (``trl grpo``, ``-m trl...``) are known."""
    import os

    if not script or script == 'trl grpo' or script.startswith('-m trl'):
        return False
    return not (script.endswith('.py') and os.path.isfile(script))


def _served_by_the_server_beside(cfg, launch):
    """A ``trl vllm-serve`` beside a trainer whose script is not here and whose arguments say nothing of vLLM: the
    script sets ``use_vllm`` and ``vllm_mode="server"`` in code (TRL's client only ever talks to such a server), so
    the launch is planned in server mode, on the server's model when the arguments name none; said in a note."""
    r = launch.rollout
    said = any(w.lstrip('-').split('=')[0] in ('use_vllm', 'vllm_mode') for w in launch.argv if w.startswith('--'))
    if r is None or r.framework != 'trl' or cfg.use_vllm or said or not _script_unread(launch.trl.script):
        return cfg, launch
    cfg = replace(cfg, use_vllm=True, vllm_mode='server', model=cfg.model or r.model)
    note = (
        f'{launch.trl.script} is not here and its arguments do not set use_vllm: with `trl vllm-serve` '
        f'({r.source}) beside it, planned as the script using that server (use_vllm, vllm_mode server'
        + (f", the server's model {r.model}" if r.model and cfg.model == r.model else '')
        + ')'
    )
    return cfg, replace(launch, notes=[*launch.notes, note])


def post_read(cfg, launch, packages: dict):
    """TRL 0.14-0.15's ``vllm_device`` (reader.py ``old_vllm_device``); the settings the script writes in code and
    accelerate's config file, as assumptions."""
    from .reader import old_vllm_device

    cfg, launch, assumptions = old_vllm_device(cfg, launch, packages.get('trl'))
    if launch.trl.script_settings:
        assumptions.append(launch.trl.script_settings)
    source = (launch.trl.accelerate or {}).get('config_source')
    if source:
        assumptions.append(f"accelerate's settings from {source}, then its command-line options")
    return cfg, launch, assumptions


def server_command(model, tp: int, dp: int) -> str:
    """``trl vllm-serve`` with tp x dp engines."""
    return f'trl vllm-serve --model {model} ' + (
        f'--data-parallel-size {dp}' if tp == 1 else f'--tensor-parallel-size {tp}'
    )


def unknown_arguments(ctx):
    """Whose parser refuses each word: TrlParser, the script's own argparse, accelerate (verdicts.py)."""
    from .verdicts import argument_findings

    return argument_findings(ctx.launch, ctx.remaining, ctx.packages.get('trl'))


TRL = Framework(
    name='trl',
    display='TRL',
    server='trl vllm-serve',
    server_flag_prefix='--',
    server_unknown_source='trl/scripts/vllm_serve.py (TrlParser)',
    server_port_source='trl/scripts/vllm_serve.py (ScriptArguments.port, default 8000)',
    server_gpu_check_source=None,
    server_host_required=False,
    launcher_places_processes=True,
    prompt_limit=False,
    own_batch_source='trl/trainer/grpo_config.py::GRPOConfig.__post_init__',
    registry_check=None,
    requires_model_flag=False,
    checks_packages=False,
    rewards_by_name=False,
    expandable_toggle_from=None,
    zero3_gathers_for_generation=True,
    weight_sync='per_param',
    old_logps_always=False,
    # trl/trainer/grpo_trainer.py GRPOTrainer.__init__: device_map None for MULTI_GPU or DEEPSPEED;
    # trl/trainer/utils.py create_model_from_path: 'auto' otherwise
    device_map_unless='distributed',
    logits_span_prompts=False,
    missing_knobs=SWIFT_ONLY,
    fix_arguments=f'{WORDING}:fix_arguments',
    model_hub='TRL loads the model with transformers from the Hugging Face hub',
    vllm_dtype_source=None,
    runnable=False,
    swift_release=False,
    shows_resolved=True,
    settings_yaml_in_config=False,
    read_config=f'{HERE}:read_config',
    post_read=f'{HERE}:post_read',
    reword=f'{WORDING}:reword',
    render_fixes=f'{WORDING}:render_fixes',
    fixed_launch=f'{WORDING}:fixed_launch',
    fix_text=f'{WORDING}:fix_text',
    server_command=f'{HERE}:server_command',
    unknown_arguments=f'{HERE}:unknown_arguments',
    handover='grpo_recipes.frontends.trl.handover:handover',
    package='trl',
    pin_release='grpo_recipes.frontends.trl.versions:checked_packages',
    validator='grpo_recipes.realparse:trl_parse',
    server_flag_dashes=True,
)
