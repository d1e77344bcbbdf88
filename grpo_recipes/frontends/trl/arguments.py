"""TRL's argument names, read from a snapshot of the installed TRL's fields (``trl_args_snapshot.json``, written by
scripts/gen_trl_snapshot.py; a test fails when it drifts) as ``TrlParser`` reads them over GRPOConfig, ModelConfig
and ScriptArguments; names older TRL releases had; and TRL's wording of a finding (``trl_terms``)."""

from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any

from ...versions import version_tuple

# accelerate launch options that take a value (accelerate/commands/launch.py launch_command_parser);
# every other option of it is a flag.
ACCELERATE_VALUE_OPTIONS = {
    'config_file',
    'num_processes',
    'num_machines',
    'machine_rank',
    'main_process_ip',
    'main_process_port',
    'gpu_ids',
    'mixed_precision',
    'dynamo_backend',
    'dynamo_mode',
    'num_cpu_threads_per_process',
    'zero_stage',
    'offload_optimizer_device',
    'offload_param_device',
    'offload_optimizer_nvme_path',
    'offload_param_nvme_path',
    'gradient_accumulation_steps',
    'gradient_clipping',
    'zero3_init_flag',
    'zero3_save_16bit_model',
    'deepspeed_config_file',
    'deepspeed_hostfile',
    'deepspeed_exclusion_filter',
    'deepspeed_inclusion_filter',
    'deepspeed_multinode_launcher',
    'fsdp_version',
    'fsdp_sharding_strategy',
    'fsdp_reshard_after_forward',
    'fsdp_offload_params',
    'fsdp_auto_wrap_policy',
    'fsdp_transformer_layer_cls_to_wrap',
    'fsdp_state_dict_type',
    'fsdp_activation_checkpointing',
    'rdzv_backend',
    'rdzv_conf',
    'max_restarts',
    'monitor_interval',
    'log_dir',
    'role',
    'tee',
    'main_training_function',
    'downcast_bf16',
    'tpu_cluster',
    'tpu_vm',
    'env',
    'parallelism_config_dp_replicate_size',
    'parallelism_config_dp_shard_size',
    'parallelism_config_tp_size',
    'parallelism_config_cp_size',
    'fsdp_min_num_params',
    'fsdp_backward_prefetch',
    'fsdp_forward_prefetch',
    'fsdp_use_orig_params',
    'fsdp_cpu_ram_efficient_loading',
    'fsdp_sync_module_states',
    'mpirun_hostfile',
    'mpirun_ccl',
    'same_network',
    'dynamo_use_fullgraph',
    'dynamo_use_dynamic',
    'dynamo_use_regional_compilation',
}
TORCHRUN_VALUE_OPTIONS = {
    'nproc_per_node',
    'nproc-per-node',
    'nnodes',
    'node_rank',
    'node-rank',
    'master_addr',
    'master-addr',
    'master_port',
    'master-port',
    'rdzv_backend',
    'rdzv-backend',
    'rdzv_endpoint',
    'rdzv-endpoint',
    'rdzv_id',
    'rdzv-id',
    'max_restarts',
    'max-restarts',
    'log_dir',
    'log-dir',
}

# Names older TRL releases had and the installed TRL does not: (the release that removed it, or None where
# that release is not pinned down here, and the current equivalent).
# vllm_device/vllm_dtype: TRL 0.14-0.15 started vLLM inside the trainer on one spare GPU; 0.16 replaced
# that with `trl vllm-serve` (huggingface/trl PR #3094), and 0.18 added --vllm_mode colocate.
STALE = {
    'vllm_device': (
        (0, 16),
        "TRL 0.14-0.15 ran vLLM on one spare GPU of the trainer's (vllm_device); from 0.16 use "
        '--vllm_mode server with `trl vllm-serve` on GPUs of its own, or (0.18+) --vllm_mode '
        'colocate',
    ),
    'vllm_dtype': ((0, 16), "removed with vllm_device (TRL 0.16): the server's dtype is `trl vllm-serve --dtype`"),
    'vllm_max_model_len': (
        None,
        "TRL's name is vllm_max_model_length (colocate); for a server, `trl vllm-serve --max_model_len`",
    ),
    'max_prompt_length': (
        (0, 28),
        'TRL 0.26 stopped truncating prompts and 0.28 removed max_prompt_length: filter '
        'the data to the prompt length you plan for (grpo-data filter)',
    ),
    'torch_dtype': ((0, 27), 'TRL 0.27 removed --torch_dtype (an alias of --dtype from 0.23): use --dtype'),
}

# Framework-neutral field (GRPOConfig of this package, ms-swift's names) -> TRL's flag, where they differ.
TRL_FLAGS = {
    'vllm_max_model_len': 'vllm_max_model_length',
    'tuner_type': 'use_peft',
    'lora_rank': 'lora_r',
    'model': 'model_name_or_path',
    'sleep_level': 'vllm_enable_sleep_mode',
    'target_modules': 'lora_target_modules',
    'torch_dtype': 'dtype',
}
# Launch settings that accelerate, not the script, holds.
ACCELERATE_FLAGS = {
    'NPROC_PER_NODE': 'num_processes',
    'NNODES': 'num_machines',
    'NODE_RANK': 'machine_rank',
    'MASTER_ADDR': 'main_process_ip',
    'MASTER_PORT': 'main_process_port',
}
# ms-swift settings with no TRL equivalent: the fix search leaves them alone for a TRL launch.
SWIFT_ONLY = ('offload_model', 'offload_optimizer', 'move_model_batches', 'max_length', 'truncation_strategy')

CLASSES = ('GRPOConfig', 'ModelConfig', 'ScriptArguments')
TRL_GRPO_CLASSES = ('GRPOScriptArguments', 'GRPOConfig', 'ModelConfig', 'DatasetMixtureConfig')
"""What ``trl grpo`` parses with: trl/scripts/grpo.py ``make_parser`` (GRPOScriptArguments adds reward_funcs and
reward_model_name_or_path to ScriptArguments; DatasetMixtureConfig: datasets, streaming, test_split_size)."""


def classes_of(script: str | None) -> tuple[str, ...]:
    """The snapshot's classes whose fields the launch's parser reads: ``trl grpo``'s, else TRL's usual three."""
    return TRL_GRPO_CLASSES if script == 'trl grpo' else CLASSES


@lru_cache(maxsize=1)
def snapshot() -> dict:
    return json.loads(resources.files('grpo_recipes').joinpath('trl_args_snapshot.json').read_text('utf-8'))


def _fields(*classes: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for cls in classes:
        for f in snapshot().get(cls, ()):
            out.setdefault(f['name'], {**f, 'class': cls})
    return out


# transformers/hf_argparser.py string_to_bool: the words a bool field takes
TRUE_WORDS = ('yes', 'true', 't', 'y', '1')
BOOL_WORDS = TRUE_WORDS + ('no', 'false', 'f', 'n', '0')


def option_name(key: str) -> str:
    """The option as argparse names it in a message: HfArgumentParser adds ``--a-b`` beside ``--a_b``
    (transformers/hf_argparser.py ``_parse_dataclass_field``: ``aliases``)."""
    return f'--{key}/--{key.replace("_", "-")}' if '_' in key else f'--{key}'


def takes_a_value(spec: dict) -> bool:
    """A ``bool | None`` field whose default is None (TRL's GRPOConfig ``bf16``, ``tf32``): HfArgumentParser gives it
    ``nargs="?"``/``const=True`` only when ``field.type is bool`` or the default is not None
    (transformers/hf_argparser.py ``_parse_dataclass_field``), so its flag needs a value: bare ``--bf16`` makes
    argparse stop with "argument --bf16: expected one argument"."""
    typ = spec['type'].replace('typing.', '')
    optional = 'None' in typ or 'Optional' in typ
    return 'bool' in typ and optional and spec.get('default') is None


def value_error(key: str, value: str | None, spec: dict) -> str | None:
    """argparse's message for a bool field's value (None: a bare flag), as TRL's parser prints it; None when fine."""
    if 'bool' not in spec['type'] or spec['type'].count('|') > 1:
        return None
    if value is None:
        return f'argument {option_name(key)}: expected one argument' if takes_a_value(spec) else None
    if value.lower() not in BOOL_WORDS:
        return (
            f'argument {option_name(key)}: Truthy value expected: got {value} but expected one of yes/no, '
            f'true/false, t/f, y/n, 1/0 (case insensitive).'
        )
    return None


def numeric_type(spec: dict) -> str | None:
    """'int' or 'float' for a field HfArgumentParser types as that number alone (``int``, ``int | None``: it drops
    the None of an Optional, transformers/hf_argparser.py ``_parse_dataclass_field``), else None."""
    parts = {p.strip() for p in spec['type'].replace("<class '", '').replace("'>", '').split('|')} - {'None'}
    return next(iter(parts)) if parts in ({'int'}, {'float'}) else None


def number_error(key: str, value: str, spec: dict) -> str | None:
    """argparse's message when a number field's word is no number (``type=int`` or ``float`` on the option), as
    argparse prints it ("argument --x: invalid int value: '2.0'"); None when it parses."""
    from ..shell_expand import unresolved

    typ = numeric_type(spec)
    if typ is None or unresolved(value):  # a $VAR the reader could not resolve: said as such (read_config)
        return None
    try:
        (int if typ == 'int' else float)(value)
    except ValueError:
        return f'argument {option_name(key)}: invalid {typ} value: {value!r}'
    return None


def _cast(value: str | None, spec: dict) -> Any:
    typ = spec['type']
    if value is None:
        return True if 'bool' in typ else None
    if 'bool' in typ and value.lower() in BOOL_WORDS:
        return value.lower() in TRUE_WORDS
    for cast in ((int,) if 'int' in typ and 'float' not in typ else ()) + ((float,) if 'float' in typ else ()):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def parse_args(args: list[str], classes: tuple[str, ...]) -> tuple[dict[str, Any], list[str], list[str]]:
    """``--name value`` / ``--name=value`` / ``--flag`` (dashes or underscores, as HfArgumentParser accepts)
    -> (values, unknown flags, positional words)."""
    fields = _fields(*classes)
    values: dict[str, Any] = {}
    unknown: list[str] = []
    positional: list[str] = []
    i = 0
    while i < len(args):
        tok = args[i]
        if not tok.startswith('--'):
            positional.append(tok)
            i += 1
            continue
        name, eq, val = tok[2:].partition('=')
        key = name.replace('-', '_')
        nxt = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith('--') else None
        spec = fields.get(key)
        if spec is None:
            unknown.append(f'--{name}')
            i += 1 if eq or nxt is None else 2
            if not eq and nxt is not None:
                values.setdefault('_unknown_values', {})[key] = nxt
            continue
        word = val if eq else nxt
        error = number_error(key, word, spec) if word is not None else None
        if error:  # argparse stops on it: a finding, not a value
            values.setdefault('_errors', {})[f'--{name}'] = error
            unknown.append(f'--{name}')
            i += 1 if eq else 2
        elif eq:
            values[key] = _cast(val, spec)
            i += 1
        elif 'list' in spec['type']:
            j = i + 1
            items = []
            while j < len(args) and not args[j].startswith('--'):
                items.append(args[j])
                j += 1
            values[key] = items
            i = j
        elif 'bool' in spec['type'] and (nxt is None or nxt.lower() not in BOOL_WORDS):
            error = value_error(key, nxt, spec)
            if error:  # argparse stops on it (transformers/hf_argparser.py): a finding, not a value
                values.setdefault('_errors', {})[f'--{name}'] = error
                unknown.append(f'--{name}')
                i += 1 if nxt is None else 2  # argparse took the word it refused
            else:
                values[key] = True
                i += 1
        else:
            values[key] = _cast(nxt, spec)
            i += 2
    return values, unknown, positional


@lru_cache(maxsize=1)
def _transformers_fields() -> dict:
    return json.loads(resources.files('grpo_recipes').joinpath('trl_transformers_fields.json').read_text('utf-8'))


def release_training_fields(trl_version: str | None) -> tuple[str | None, frozenset[str]]:
    """(the transformers release TRL ``trl_version`` required, its TrainingArguments fields) for a release older than
    the snapshot's; (None, empty) otherwise (the snapshot was written with the installed transformers). GRPOConfig
    subclasses TrainingArguments, so such a field (``warmup_ratio``, gone in transformers 5) is one that TRL's parser
    knew (trl_transformers_fields.json, scripts/gen_trl_transformers_fields.py)."""
    vt, st = version_tuple(trl_version), version_tuple(snapshot()['trl_version'])
    if vt is None or st is None or vt[:2] >= st[:2]:
        return None, frozenset()
    data = _transformers_fields()
    release = data['trl_requires'].get(f'{vt[0]}.{vt[1]}')
    if release is None:  # older than the releases listed: the oldest listed
        release = data['trl_requires'][min(data['trl_requires'], key=lambda v: version_tuple(v))]
    return release, frozenset(data['training_arguments'][release])


def describe_unknown(flag: str, classes: tuple[str, ...], trl_version: str | None = None) -> tuple[str, bool]:
    """(message, fatal) for an argument the snapshot's TRL does not define. A name an older TRL had is fatal
    for the TRL in question when that TRL is at or past the release that removed it (TrlParser rejects it);
    anything else may be the script's own argument. ``trl_version``: the TRL the launch runs (default: the
    snapshot's, which is the installed one)."""
    key = flag.lstrip('-').replace('-', '_')
    snap = snapshot()['trl_version']
    version = trl_version or snap
    vt, st = version_tuple(version), version_tuple(snap)
    if key in STALE:
        removed, equivalent = STALE[key]
        if vt is not None and ((removed is not None and vt < removed) or (removed is None and st and vt < st)):
            return '', False  # that TRL still had it (or this package cannot tell): not a finding
        return f'{flag}: not an argument of TRL {version}; {equivalent}', True
    if key in release_training_fields(trl_version)[1]:
        return '', False  # a TrainingArguments field of the transformers that TRL release ran with
    close = difflib.get_close_matches(key, list(_fields(*classes)), n=1, cutoff=0.75)
    hint = f'; did you mean --{close[0]}?' if close else ''
    older = f' (fields read from TRL {snap}; TRL {version} may differ)' if vt and st and vt != st else ''
    return (
        f"{flag}: not an argument of TRL {version}'s GRPOConfig, ModelConfig or ScriptArguments (your script "
        f'may define it){hint}{older}'
    ), False


def in_trl_terms(finding):
    """A finding of a TRL launch with TRL's and accelerate's names in its arguments, message and fix."""
    from dataclasses import replace

    args = [TRL_FLAGS.get(a, ACCELERATE_FLAGS.get(a, a)) for a in finding.arguments]
    return replace(finding, arguments=args, message=trl_terms(finding.message), fix=trl_terms(finding.fix))


def trl_terms(text: str | None) -> str | None:
    """A message or fix written in the neutral (ms-swift) names, in TRL's and accelerate's terms: ``key: value``
    becomes ``--trl_flag value``, ``ENV: {NPROC_PER_NODE: 4}`` becomes ``accelerate launch --num_processes 4``,
    a ZeRO stage becomes accelerate's DeepSpeed options. The one place where a TRL launch's wording is made."""
    if not text:
        return text

    def env_block(m: re.Match) -> str:
        parts = []
        prefix = []
        for key, val in re.findall(r'(\w+):\s*("[^"]*"|[^,}]+)', m.group(1)):
            val = val.strip().strip('"')
            if key == 'CUDA_VISIBLE_DEVICES':
                prefix.append(f'CUDA_VISIBLE_DEVICES={val}')
            elif key in ACCELERATE_FLAGS:
                parts.append(f'--{ACCELERATE_FLAGS[key]} {val}')
        return ' '.join(prefix + ['accelerate launch'] + parts) if parts else ' '.join(prefix)

    text = re.sub(r'ENV:\s*\{([^}]*)\}', env_block, text)
    text = re.sub(r'\bCUDA_VISIBLE_DEVICES: "([^"]*)"', r'CUDA_VISIBLE_DEVICES=\1', text)
    text = re.sub(r'\bsleep_level: [1-9]', '--vllm_enable_sleep_mode true', text)
    text = re.sub(r'\bsleep_level: 0', '--vllm_enable_sleep_mode false', text)

    def zero(m: re.Match) -> str:
        stage, offload = m.group(1), m.group(2)
        out = f'accelerate launch --use_deepspeed --zero_stage {stage}'
        if offload:
            out += ' --offload_optimizer_device cpu' + (' --offload_param_device cpu' if stage == '3' else '')
        return out

    text = re.sub(r'\bdeepspeed: zero(\d)(_offload)?', zero, text)
    for key, flag in ACCELERATE_FLAGS.items():
        text = re.sub(rf'\b{key}\b', f"accelerate's --{flag}", text)
    flags = {f['name'] for cls in CLASSES for f in snapshot()[cls]} | set(TRL_FLAGS)
    text = re.sub(
        r'(?<![\w-])(\w+): (?=\S)',
        lambda m: f'--{TRL_FLAGS.get(m.group(1), m.group(1))} ' if m.group(1) in flags else m.group(0),
        text,
    )
    for key, flag in TRL_FLAGS.items():
        if '_' in key:  # a bare word like "model" is prose, not a flag
            text = re.sub(rf'(?<![\w-]){key}\b', flag, text)
    return text
