"""The checks a Megatron-SWIFT GRPO launch meets in ms-swift and Megatron-LM, run before launch.

Each rule is ``(launch, plan, model) -> list[Finding]``, declared with the ids it can emit (findings.RULE_IDS).
Messages quote ms-swift (its file named in ``source``) or Megatron-LM where they have the check; the four failures
that fire only after the model has loaded (vllm_mode unset, vllm_tensor_parallel_size not dividing the world,
vLLM's free-memory check at engine start -- memory.py --, virtual pipeline stages with beta != 0 at the first
rollout) are reported here, before anything loads.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable

from ...divisors import divisors as all_divisors
from ...divisors import largest_divisor_at_most
from ...findings import ERROR, INFO, WARNING, Finding, declare
from .plan import parallel, resolve_generation, tuner
from .reader import MegatronLaunch

ARGS = 'swift/megatron/arguments/megatron_args.py'
ROLLOUT = 'swift/megatron/trainers/rollout_mixin.py'
GRPO = 'swift/megatron/trainers/grpo_trainer.py'
MCORE_PS = 'Megatron-LM megatron/core/parallel_state.py initialize_model_parallel'
IGNORED_NOTE = '; ignore_args_error is set, so ms-swift only logs it and the setting is lost'
MCORE_BLOCK = 'Megatron-LM megatron/core/transformer/transformer_block.py get_num_layers_to_build'
MCORE_TC = 'Megatron-LM megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__'

RULES: list[Callable] = []


def rule(*ids: str):
    def register(fn):
        fn.ids = ids
        declare(f'{fn.__module__}.{fn.__name__}', ids)
        RULES.append(fn)
        return fn

    return register


def _flag(launch: MegatronLaunch, name: str) -> str:
    return launch.explicit.get(name, f'--{name}')


def _checks(launch: MegatronLaunch) -> dict:
    """The release's GRPO checks whose presence differs between releases (snapshot 'checks': message or None)."""
    from . import snapshot as snap

    return snap.load(launch.snapshot).get('checks') or {}


def _f(sev, rid, args, msg, fix=None, source=None) -> Finding:
    return Finding(severity=sev, rule=rid, arguments=list(args), message=msg, fix=fix, source=source)


@rule('megatron.rlhf-type')
def rlhf_type(launch, plan, model):
    """ms-swift's Megatron RLHF defaults rlhf_type to dpo (swift/megatron/arguments/rlhf_args.py); without
    --rlhf_type grpo the launch trains DPO, which this guard does not plan."""
    t = launch.args.get('rlhf_type')
    if t == 'grpo':
        return []
    how = 'is not set (ms-swift defaults it to dpo)' if 'rlhf_type' not in launch.explicit else f'is {t!r}'
    return [
        _f(
            ERROR,
            'megatron.rlhf-type',
            ['rlhf_type'],
            f'--rlhf_type {how}: this guard checks Megatron GRPO',
            '--rlhf_type grpo',
            'swift/megatron/arguments/rlhf_args.py',
        )
    ]


@rule('megatron.unknown-args', 'megatron.renamed-args', 'megatron.abbreviated-args', 'megatron.snapshot')
def arguments(launch, plan, model):
    """ms-swift stops on strings its parser leaves over (swift/pipelines/base.py ``_parse_args``:
    ValueError remaining_argv) unless ignore_args_error; 3.x Megatron names were renamed in 4.0."""
    out = []
    rel = launch.release or launch.snapshot
    for r in launch.renamed:
        out.append(
            _f(
                ERROR,
                'megatron.renamed-args',
                [r['old'].lstrip('-')],
                f'{r["old"]} is a ms-swift 3.x Megatron argument; ms-swift {rel} does not know it '
                f'(remaining_argv: {[r["old"], *r["value"]]})',
                r['fix'],
                'swift/pipelines/base.py',
            )
        )
    if launch.unknown:
        from . import snapshot as snap

        names = list(snap.load(launch.snapshot)['fields'])
        fixes = []
        for tok in launch.unknown:
            if tok.startswith('--'):
                near = difflib.get_close_matches(tok[2:].split('=')[0].replace('-', '_'), names, n=1, cutoff=0.75)
                if near:
                    fixes.append(f'{tok} -> --{near[0]}')
        ignored = bool(launch.args.get('ignore_args_error'))  # ms-swift then only logs them
        out.append(
            _f(
                WARNING if ignored else ERROR,
                'megatron.unknown-args',
                [t.lstrip('-') for t in launch.unknown if t.startswith('--')],
                f'remaining_argv: {launch.unknown} (ms-swift {rel}: MegatronRLHFArguments has no such '
                f'argument{IGNORED_NOTE if ignored else ""})',
                '; '.join(fixes) or 'remove them, or check `megatron rlhf --help` for the name',
                'swift/pipelines/base.py',
            )
        )
    for written, full in launch.abbreviated:
        out.append(
            _f(
                INFO,
                'megatron.abbreviated-args',
                [full.lstrip('-')],
                f'{written} is read as {full} (argparse accepts a unique prefix); a later ms-swift argument '
                f'with the same prefix would make it ambiguous',
                full,
            )
        )
    if launch.snapshot_note:
        out.append(_f(INFO, 'megatron.snapshot', [], launch.snapshot_note))
    return out


@rule('megatron.not-supported')
def not_supported(launch, plan, model):
    """RLHFMegatronArgumentsMixin._init_grpo ``_check_not_supported``: async_generate, sync_ref_model and
    num_iterations > 1 stop Megatron GRPO at argument parsing; REAL needs micro_batch_size % num_generations. The
    same file's parse also stops a partial freeze_parameters_ratio under pipeline parallelism and a save_total_limit
    below 2 or with async_save."""
    a = launch.args
    out = []
    for name, bad, msg in (
        ('async_generate', a.get('async_generate'), 'async_generate is not supported for Megatron GRPO right now'),
        ('sync_ref_model', a.get('sync_ref_model'), 'sync_ref_model is not supported for Megatron GRPO right now'),
        (
            'num_iterations',
            (a.get('num_iterations') or 1) > 1,
            'num_iterations > 1 is not supported for Megatron GRPO right now',
        ),
    ):
        if bad:
            fix = '--num_iterations 1' if name == 'num_iterations' else f'--{name} false'
            out.append(_f(ERROR, 'megatron.not-supported', [name], msg, fix, ARGS))
    checks = _checks(launch)
    if checks.get('dataset_shuffle_false_unsupported') and a.get('dataset_shuffle') is False:
        out.append(
            _f(
                ERROR,
                'megatron.not-supported',
                ['dataset_shuffle'],
                checks['dataset_shuffle_false_unsupported'],
                '--dataset_shuffle true',
                ARGS,
            )
        )
    if checks.get('multi_turn_unsupported') and a.get('multi_turn_scheduler'):
        out.append(
            _f(
                ERROR,
                'megatron.not-supported',
                ['multi_turn_scheduler'],
                checks['multi_turn_unsupported'],
                'drop --multi_turn_scheduler (ms-swift 4.3.2 and later accept it)',
                ARGS,
            )
        )
    if (
        a.get('loss_type') == 'real'
        and a.get('micro_batch_size')
        and a.get('num_generations')
        and a['micro_batch_size'] % a['num_generations']
    ):
        out.append(
            _f(
                ERROR,
                'megatron.not-supported',
                ['loss_type', 'micro_batch_size'],
                (
                    f'"REAL loss requires that the training micro_batch_size ({a["micro_batch_size"]}) is a multiple '
                    'of '
                    f'num_generations ({a["num_generations"]}). Please adjust your batch parameters.'
                ),
                f'--micro_batch_size {a["num_generations"]}',
                ARGS,
            )
        )
    if a.get('truncation_strategy') not in (None, 'left', 'delete'):
        out.append(
            _f(
                ERROR,
                'megatron.not-supported',
                ['truncation_strategy'],
                (
                    "GRPO requires `truncation_strategy 'left' or 'delete'`, Current value: "
                    f"`truncation_strategy='{a['truncation_strategy']}'`."
                ),
                '--truncation_strategy left',
                ARGS,
            )
        )
    if 'soft_overlong' in (a.get('reward_funcs') or []) and a.get('soft_cache_length') is None:
        out.append(
            _f(
                ERROR,
                'megatron.not-supported',
                ['soft_cache_length'],
                'The soft_cache_length must be set when using soft overlong rewards.',
                '--soft_cache_length 512',
                ARGS,
            )
        )
    # MegatronTunerMixin.__post_init__ (same file): a partial freeze cannot be split over pipeline stages
    ratio = a.get('freeze_parameters_ratio') or 0
    if 0 < ratio < 1 and (a.get('pipeline_model_parallel_size') or 1) > 1:
        out.append(
            _f(
                ERROR,
                'megatron.not-supported',
                ['freeze_parameters_ratio', 'pipeline_model_parallel_size'],
                '`freeze_parameters_ratio` is not supported when `pipeline_model_parallel_size` > 1',
                '--freeze_parameters_ratio 0 (or --pipeline_model_parallel_size 1)',
                ARGS,
            )
        )
    # MegatronArguments.__post_init__: checkpoint rotation (save_total_limit, ms-swift >= 4.0)
    limit = a.get('save_total_limit')
    if limit is not None and a.get('async_save'):
        out.append(
            _f(
                ERROR,
                'megatron.not-supported',
                ['save_total_limit', 'async_save'],
                'async_save is not supported with save_total_limit.',
                '--async_save false (or drop --save_total_limit)',
                ARGS,
            )
        )
    elif limit is not None and limit < 2:
        out.append(
            _f(
                ERROR,
                'megatron.not-supported',
                ['save_total_limit'],
                'save_total_limit must be greater than or equal to 2.',
                '--save_total_limit 2',
                ARGS,
            )
        )
    return out


@rule(
    'megatron.vllm-required',
    'megatron.vllm-mode-unset',
    'megatron.vllm-tp-world',
    'megatron.reward-funcs',
    'megatron.server-address',
)
def rollout(launch, plan, model):
    """Megatron GRPO rolls out with vLLM only (``assert self.use_vllm``, _init_grpo); vllm_mode has no default and
    an unset one stops after the model has loaded (rollout_mixin.py ``_init_rollout_engine``: Invalid vllm_mode:
    None); a colocated vllm_tensor_parallel_size must divide the world; the trainer asserts reward_funcs."""
    a = launch.args
    out = []
    if not a.get('use_vllm') and not a.get('use_ray'):
        out.append(
            _f(
                ERROR,
                'megatron.vllm-required',
                ['use_vllm'],
                'use_vllm must be True for Megatron GRPO',
                '--use_vllm true --vllm_mode colocate',
                ARGS,
            )
        )
        return out
    mode = a.get('vllm_mode')
    if mode is None:
        early = _checks(launch).get('vllm_mode_required_at_parse')
        msg = (
            f'{early} (asserted when the arguments are parsed)'
            if early
            else 'Invalid vllm_mode: None -- ms-swift raises this in _init_rollout_engine, after the Megatron model '
            'and its weights have loaded (vllm_mode has no default in MegatronRLHFArguments)'
        )
        out.append(
            _f(
                ERROR,
                'megatron.vllm-mode-unset',
                ['vllm_mode'],
                msg,
                '--vllm_mode colocate (or --vllm_mode server with a `swift rollout` server)',
                ARGS if early else ROLLOUT,
            )
        )
    if mode == 'server' and not a.get('vllm_server_base_url'):
        hosts, ports = a.get('vllm_server_host'), a.get('vllm_server_port') or []
        client = 'swift/rlhf_trainers/vllm_client.py VLLMClient (built by swift/megatron/pipelines/train/rlhf.py)'
        if hosts is None:
            out.append(
                _f(
                    ERROR,
                    'megatron.server-address',
                    ['vllm_server_host'],
                    (
                        "object of type 'NoneType' has no len() -- vllm_mode server without --vllm_server_host or "
                        '--vllm_server_base_url: the Megatron pipeline passes hosts=None to the vLLM client'
                    ),
                    '--vllm_server_host 127.0.0.1 --vllm_server_port 8000',
                    client,
                )
            )
        elif len(hosts) != len(ports):
            out.append(
                _f(
                    ERROR,
                    'megatron.server-address',
                    ['vllm_server_host', 'vllm_server_port'],
                    'host and server_port must have same length when lists are provided',
                    f'--vllm_server_port {" ".join(str(8000 + i) for i in range(len(hosts)))}',
                    client,
                )
            )
    world = launch.world_size
    vtp = a.get('vllm_tensor_parallel_size') or 1
    if mode == 'colocate' and world % vtp:
        divisors = [d for d in all_divisors(world) or [] if d <= vtp]
        out.append(
            _f(
                ERROR,
                'megatron.vllm-tp-world',
                ['vllm_tensor_parallel_size', 'NPROC_PER_NODE'],
                (
                    f'vllm_tensor_parallel_size ({vtp}) must divide world size ({world}) evenly. -- raised after the '
                    'model '
                    f'has loaded (_init_rollout_engine)'
                ),
                f'--vllm_tensor_parallel_size {divisors[-1]}',
                ROLLOUT,
            )
        )
    if (
        not a.get('reward_funcs')
        and not a.get('use_gym_env')
        and not a.get('gym_env')
        and not a.get('teacher_model')
        and not a.get('teacher_model_server')
    ):
        # server mode with use_gym_env unset: the trainer asks the rollout server whether it runs a gym
        # (grpo_trainer.py _resolve_use_gym_env, 4.6)
        server = launch.rollout if mode == 'server' else None
        if not (server is not None and getattr(server, 'use_gym_env', False)) and not (
            mode == 'server' and a.get('use_gym_env') is None and server is None
        ):
            out.append(
                _f(
                    ERROR,
                    'megatron.reward-funcs',
                    ['reward_funcs'],
                    (
                        'reward_funcs is not set (or pass --use_gym_env true / a teacher for OPD-RL) -- asserted '
                        'when the GRPO '
                        'trainer is built, after the model has loaded'
                    ),
                    '--reward_funcs accuracy format',
                    GRPO,
                )
            )
        elif server is None:
            out.append(
                _f(
                    WARNING,
                    'megatron.reward-funcs',
                    ['reward_funcs'],
                    (
                        'reward_funcs is not set: in server mode the trainer takes the gym reward when the rollout '
                        'server '
                        'runs with --use_gym_env true (grpo_trainer.py _resolve_use_gym_env); with a server that '
                        'does not, '
                        'it stops with "reward_funcs is not set" after the model has loaded'
                    ),
                    '--reward_funcs accuracy format, or the rollout server with --use_gym_env true',
                    GRPO,
                )
            )
    return out


@rule('megatron.world-divisible', 'megatron.expert-world-divisible', 'megatron.gpus')
def world(launch, plan, model, hw=None):
    """Megatron-LM's initialize_model_parallel needs world % (TP x PP x CP) == 0 and world % (ETP x EP x PP) == 0;
    NPROC_PER_NODE beyond the node's GPUs fails at CUDA device selection."""
    par = parallel(launch)
    out = []
    w = par['world_size']
    total = par['tp'] * par['pp'] * par['cp']
    if w % total:
        out.append(
            _f(
                ERROR,
                'megatron.world-divisible',
                ['tensor_model_parallel_size', 'pipeline_model_parallel_size', 'context_parallel_size'],
                (
                    f'world_size ({w}) is not divisible by {total} (tensor {par["tp"]} x pipeline {par["pp"]} x '
                    f'context {par["cp"]} parallel size)'
                ),
                f'NPROC_PER_NODE x NNODES a multiple of {total}',
                MCORE_PS,
            )
        )
    ex = par['etp'] * par['ep'] * par['pp']
    if w % ex:
        out.append(
            _f(
                ERROR,
                'megatron.expert-world-divisible',
                ['expert_model_parallel_size', 'expert_tensor_parallel_size'],
                (
                    f'world_size ({w}) is not divisible by expert_tensor_model_pipeline_parallel_size {ex} '
                    f'(expert tensor {par["etp"]} x expert model {par["ep"]} x pipeline {par["pp"]})'
                ),
                None,
                MCORE_PS,
            )
        )
    visible = launch.env.get('CUDA_VISIBLE_DEVICES')
    if visible is not None and visible.strip() and launch.nproc_per_node > len(visible.split(',')):
        n = len(visible.split(','))
        out.append(
            _f(
                ERROR,
                'megatron.gpus',
                ['NPROC_PER_NODE', 'CUDA_VISIBLE_DEVICES'],
                f'NPROC_PER_NODE={launch.nproc_per_node} but CUDA_VISIBLE_DEVICES={visible} shows {n} GPUs: '
                f'ranks past {n - 1} find no device',
                f'NPROC_PER_NODE={n}',
            )
        )
    elif hw is not None and hw.gpus and launch.nproc_per_node > hw.gpus:
        out.append(
            _f(
                ERROR,
                'megatron.gpus',
                ['NPROC_PER_NODE'],
                f'NPROC_PER_NODE={launch.nproc_per_node} but the node has {hw.gpus} GPUs',
                f'NPROC_PER_NODE={hw.gpus}',
            )
        )
    return out


@rule('megatron.generation-batch', 'megatron.dp-alignment', 'megatron.num-microbatches')
def batches(launch, plan, model):
    """resolve_generation_batch_size and validate_batch_dp_alignment (megatron_args.py), and Megatron-LM's
    micro-batch calculator: global_batch_size % (micro_batch_size x DP) == 0."""
    a = launch.args
    out = []
    gbs, mbs, ng = a.get('global_batch_size'), a.get('micro_batch_size'), a.get('num_generations')
    both = a.get('generation_batch_size') is not None and a.get('steps_per_generation') is not None
    if both and _checks(launch).get('generation_batch_exclusive'):
        out.append(
            _f(
                ERROR,
                'megatron.generation-batch',
                ['generation_batch_size', 'steps_per_generation'],
                _checks(launch)['generation_batch_exclusive'],
                '--steps_per_generation only',
                ARGS,
            )
        )
        return out
    gen, spg, err = resolve_generation(a.get('generation_batch_size'), a.get('steps_per_generation'), gbs or 0)
    if err:
        out.append(
            _f(
                ERROR,
                'megatron.generation-batch',
                ['generation_batch_size', 'steps_per_generation'],
                err,
                '--steps_per_generation only (generation_batch_size follows)',
                ARGS,
            )
        )
        return out
    if spg is not None and spg <= 0:
        out.append(
            _f(
                ERROR,
                'megatron.generation-batch',
                ['steps_per_generation'],
                f'steps_per_generation must be > 0, got {spg}.',
                '--steps_per_generation 1',
                ARGS,
            )
        )
        return out
    if ng and ng > 1 and gen % ng:
        out.append(
            _f(
                ERROR,
                'megatron.generation-batch',
                ['global_batch_size', 'num_generations'],
                f'generation_batch_size ({gen}) must be divisible by num_generations ({ng}).',
                f'--global_batch_size {(-(-gen // ng)) * ng // (spg or 1) or ng}',
                ARGS,
            )
        )
        return out
    dp = plan['parallel']['dp']
    if not dp or not ng or not mbs:
        return out
    world = plan['world_size']
    prompts = gen // ng
    if prompts % dp:
        out.append(
            _f(
                ERROR,
                'megatron.dp-alignment',
                ['generation_batch_size', 'num_generations'],
                (
                    f'num_rollout_prompt ({prompts}) = generation_batch_size ({gen}) // num_generations ({ng}) must be '
                    f'divisible by dp_size ({dp}).'
                ),
                f'--global_batch_size {ng * dp * mbs}',
                ARGS,
            )
        )
    elif prompts // dp < 1:
        out.append(
            _f(
                ERROR,
                'megatron.dp-alignment',
                ['generation_batch_size'],
                (
                    f'per_device_num_rollout_prompt ({prompts // dp}) must be >= 1, please adjust '
                    'generation_batch_size/steps_per_generation/num_generations.'
                ),
                None,
                ARGS,
            )
        )
    elif (prompts // dp) % mbs:
        out.append(
            _f(
                ERROR,
                'megatron.dp-alignment',
                ['micro_batch_size', 'generation_batch_size'],
                (
                    f'Per-device rollout prompt count ({prompts // dp}) = (generation_batch_size ({gen}) // '
                    'num_generations '
                    f'({ng})) // dp_size ({dp}) must be divisible by micro_batch_size ({mbs}).'
                ),
                f'--micro_batch_size {largest_divisor_at_most(prompts // dp, mbs)}',
                ARGS,
            )
        )
    elif gen // world < 1:
        out.append(
            _f(
                ERROR,
                'megatron.dp-alignment',
                ['generation_batch_size'],
                f'per_device_generation_batch_size ({gen // world}) must be >= 1.',
                None,
                ARGS,
            )
        )
    if gbs and gbs % (mbs * dp):
        out.append(
            _f(
                ERROR,
                'megatron.num-microbatches',
                ['global_batch_size', 'micro_batch_size'],
                (
                    f'global batch size ({gbs}) is not divisible by micro batch size ({mbs}) times data parallel size '
                    f'({dp})'
                ),
                f'--global_batch_size {(gbs // (mbs * dp) + 1) * mbs * dp}',
                'Megatron-LM megatron/core/num_microbatches_calculator.py',
            )
        )
    return out


@rule(
    'megatron.recompute',
    'megatron.sequence-parallel-off',
    'megatron.tp-comm-overlap',
    'megatron.pp-layers',
    'megatron.group-by-length',
    'megatron.ep-tp-sequence-parallel',
)
def megatron_args(launch, plan, model):
    """MegatronArguments.__post_init__ checks (megatron_args.py): selective recompute with a method, TP comm
    overlap without sequence parallelism, uneven PP layers with PP 1, group_by_length with padding_free; and the
    silent change: sequence_parallel with TP 1 is turned off. Megatron-LM's ModelParallelConfig requires sequence
    parallelism when EP and TP are both above 1."""
    a = launch.args
    out = []
    if a.get('recompute_granularity') == 'selective' and a.get('recompute_method') is not None:
        out.append(
            _f(
                ERROR,
                'megatron.recompute',
                ['recompute_method'],
                'recompute method is not yet supported for selective recomputing granularity',
                '--recompute_granularity full (or drop --recompute_method)',
                ARGS,
            )
        )
    tp = a.get('tensor_model_parallel_size') or 1
    if a.get('sequence_parallel') and tp <= 1:
        out.append(
            _f(
                INFO,
                'megatron.sequence-parallel-off',
                ['sequence_parallel'],
                'sequence_parallel is set with tensor_model_parallel_size 1: ms-swift turns it off '
                '(MegatronArguments.__post_init__)',
                None,
                ARGS,
            )
        )
    if (a.get('expert_model_parallel_size') or 1) > 1 and tp > 1 and not a.get('sequence_parallel'):
        out.append(
            _f(
                ERROR,
                'megatron.ep-tp-sequence-parallel',
                ['sequence_parallel'],
                'When using expert parallelism and tensor parallelism, sequence parallelism must be used',
                '--sequence_parallel true',
                'Megatron-LM megatron/core/model_parallel_config.py ModelParallelConfig.__post_init__',
            )
        )
    if a.get('tp_comm_overlap') and not (a.get('sequence_parallel') and tp > 1):
        out.append(
            _f(
                ERROR,
                'megatron.tp-comm-overlap',
                ['tp_comm_overlap'],
                'Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is enabled',
                '--sequence_parallel true',
                ARGS,
            )
        )
    if (a.get('pipeline_model_parallel_size') or 1) == 1 and (
        a.get('decoder_first_pipeline_num_layers') is not None or a.get('decoder_last_pipeline_num_layers') is not None
    ):
        out.append(
            _f(
                ERROR,
                'megatron.pp-layers',
                ['decoder_first_pipeline_num_layers'],
                (
                    'pipeline_model_parallel_size must be greater than 1 if you want to set '
                    'decoder_first_pipeline_num_layers or decoder_last_pipeline_num_layers.'
                ),
                None,
                ARGS,
            )
        )
    if a.get('group_by_length') and a.get('padding_free', True):
        out.append(
            _f(
                ERROR,
                'megatron.group-by-length',
                ['group_by_length'],
                'group_by_length is not compatible with padding_free.',
                '--group_by_length false',
                ARGS,
            )
        )
    return out


MLM_ARGS_3X = (
    'Megatron-LM megatron/training/arguments.py validate_args (core_r0.14.0 and core_r0.15.0, the branches ms-swift '
    '3.11 and 3.12 install; they train through its pretrain)'
)


@rule('megatron.cpu-offload-precision')
def megatron_lm_validate_args(launch, plan, model):
    """Megatron-LM's ``validate_args``, which a 3.x release runs (ms-swift 3.x trains through megatron.training's
    ``pretrain`` -> ``initialize_megatron``; swift/megatron/init.py pins core_r0.14.0 in 3.11, core_r0.15.0 in 3.12)
    and a 4.x release does not (it builds megatron-core's OptimizerConfig itself, swift/megatron/trainers/base.py
    ``get_optimizer_and_scheduler``, whose ``__post_init__`` has no such check): ``optimizer_cpu_offload`` needs
    ``use_precision_aware_optimizer``."""
    from ...versions import version_tuple

    a = launch.args
    v = version_tuple(launch.release or launch.snapshot)
    if v is None or v >= (4,):
        return []
    out = []
    if a.get('optimizer_cpu_offload') and not a.get('use_precision_aware_optimizer'):
        out.append(
            _f(
                ERROR,
                'megatron.cpu-offload-precision',
                ['optimizer_cpu_offload', 'use_precision_aware_optimizer'],
                'The optimizer cpu offload must be used in conjunction with `--use-precision-aware-optimizer`, as the '
                'hybrid device optimizer reuses the code path of this flag.',
                f'{_flag(launch, "use_precision_aware_optimizer")} true (or drop '
                f'{_flag(launch, "optimizer_cpu_offload")})',
                MLM_ARGS_3X,
            )
        )
    return out


@rule('megatron.recompute-config')
def recompute_config(launch, plan, model):
    """megatron-core's TransformerConfig.__post_init__ (core 0.15 to 0.19), which ms-swift builds from the arguments
    when it builds the model (4.x swift/megatron/model/utils.py ``get_mcore_model_config``; 3.x through Megatron-LM):
    full recompute needs a method and a layer count; selective recompute takes no layer count. ms-swift's own
    parse-time check (selective with a method, ``megatron.recompute``) comes first."""
    a = launch.args
    gran = a.get('recompute_granularity')
    if gran in (None, 'none'):
        return []
    method, nlayers = a.get('recompute_method'), a.get('recompute_num_layers')
    when = ' -- raised when the model is built (megatron-core TransformerConfig), after the distributed start-up'
    if gran == 'full' and method is None:
        return [
            _f(
                ERROR,
                'megatron.recompute-config',
                ['recompute_granularity', 'recompute_method'],
                'Using recompute_granularity: full so recompute_method must be "block" or "uniform"' + when,
                '--recompute_method uniform' + ('' if nlayers is not None else ' --recompute_num_layers 1'),
                MCORE_TC,
            )
        ]
    if gran == 'full' and nlayers is None:
        pp = plan['parallel']['pp'] or 1
        layers = (model or {}).get('num_hidden_layers')
        bound = f'{layers // pp}' if layers else 'the layers per pipeline stage'
        return [
            _f(
                ERROR,
                'megatron.recompute-config',
                ['recompute_num_layers'],
                'When using recompute_granularity: full recompute_num_layers must be between 1 and '
                f'num_layers_per_pipeline_rank: {bound}' + when,
                '--recompute_num_layers 1',
                MCORE_TC,
            )
        ]
    if gran == 'selective' and nlayers is not None and method is None:
        return [
            _f(
                ERROR,
                'megatron.recompute-config',
                ['recompute_num_layers'],
                'When using recompute_granularity: selective recompute_num_layers must be None.' + when,
                f'drop {_flag(launch, "recompute_num_layers")} (or --recompute_granularity full '
                '--recompute_method uniform)',
                MCORE_TC,
            )
        ]
    return []


@rule('megatron.moe-config')
def moe_config(launch, plan, model):
    """megatron-core's TransformerConfig.__post_init__ MoE checks (core 0.15 to 0.19), raised when ms-swift builds
    the model from its arguments: the shared expert's overlap needs the all-to-all dispatcher, padding expert inputs
    to capacity needs a capacity factor, a capacity factor needs an aux-loss style (or no) load balancing, and
    several load-balancing types need as many aux-loss coefficients."""
    if not model:
        return []
    from ...memory.arch import Arch

    arch = Arch.from_config(model)
    if not arch.experts:
        return []
    a = launch.args
    when = ' -- raised when the model is built (megatron-core TransformerConfig), after the distributed start-up'
    out = []
    dispatcher = a.get('moe_token_dispatcher_type') or 'alltoall'
    if arch.shared_expert_intermediate and a.get('moe_shared_expert_overlap') and dispatcher == 'allgather':
        out.append(
            _f(
                ERROR,
                'megatron.moe-config',
                ['moe_shared_expert_overlap', 'moe_token_dispatcher_type'],
                # core 0.15-0.17 say "alltoall token dispatcher"; 0.18 and 0.19 also accept flex
                'moe_shared_expert_overlap only works with alltoall or flex token dispatcher.' + when,
                '--moe_token_dispatcher_type alltoall (or --moe_shared_expert_overlap false)',
                MCORE_TC,
            )
        )
    factor = a.get('moe_expert_capacity_factor')
    factor = None if factor is not None and float(factor) < 0 else factor  # a negative factor means dropless
    if a.get('moe_pad_expert_input_to_capacity') and factor is None:
        out.append(
            _f(
                ERROR,
                'megatron.moe-config',
                ['moe_pad_expert_input_to_capacity'],
                'moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity' + when,
                '--moe_expert_capacity_factor 1.0 (or --moe_pad_expert_input_to_capacity false)',
                MCORE_TC,
            )
        )
    balancing = a.get('moe_router_load_balancing_type')
    balancing = balancing if isinstance(balancing, list) else [balancing] if balancing else []
    allowed = ('aux_loss', 'seq_aux_loss', 'global_aux_loss', 'none')
    if factor is not None and any(b not in allowed for b in balancing):
        out.append(
            _f(
                ERROR,
                'megatron.moe-config',
                ['moe_expert_capacity_factor', 'moe_router_load_balancing_type'],
                'moe_expert_capacity_factor only works with aux_loss, seq_aux_loss, global_aux_loss or none load '
                'balancing' + when,
                '--moe_router_load_balancing_type aux_loss (or drop --moe_expert_capacity_factor)',
                MCORE_TC,
            )
        )
    # ms-swift turns one-element lists into their element (MegatronArguments.__post_init__); megatron-core then
    # wants one coefficient per load-balancing type when several are given
    coeff = a.get('moe_aux_loss_coeff')
    coeff = coeff[0] if isinstance(coeff, list) and len(coeff) == 1 else coeff
    if len(balancing) > 1 and not (isinstance(coeff, list) and len(coeff) == len(balancing)):
        each = coeff[0] if isinstance(coeff, list) and coeff else coeff if coeff is not None else 0.0
        out.append(
            _f(
                ERROR,
                'megatron.moe-config',
                ['moe_aux_loss_coeff', 'moe_router_load_balancing_type'],
                'moe_aux_loss_coeff must be a list of the same length as moe_router_load_balancing_type' + when,
                f'--moe_aux_loss_coeff {" ".join([str(each)] * len(balancing))} (one per load-balancing type)',
                MCORE_TC,
            )
        )
    return out


# TransformerConfig.__post_init__'s allowed ``recompute_modules`` (core 0.15 to 0.18; 0.19 adds gdn_norm_out):
# a module is refused only when no supported release accepts it
RECOMPUTE_MODULES = ('core_attn', 'moe_act', 'layernorm', 'mla_up_proj', 'mlp', 'moe', 'shared_experts', 'gdn_norm_out')


def _set(names) -> str:
    """A set of names as Python prints it, in a fixed order."""
    return '{' + ', '.join(repr(n) for n in sorted(names)) + '}'


@rule('megatron.recompute-modules', 'megatron.deepep-dispatcher')
def recompute_modules(launch, plan, model):
    """megatron-core's TransformerConfig.__post_init__ (core 0.15 to 0.19), raised when ms-swift builds the model
    (4.x passes every TransformerConfig field it has an argument for, swift/megatron/model/utils.py
    ``get_mcore_model_config``): with selective recompute (ms-swift's default granularity) each of
    ``recompute_modules`` must be one megatron-core knows, ``moe_act`` needs ``moe_grouped_gemm`` and
    ``shared_experts`` cannot be recomputed while the shared expert overlaps its communication;
    ``moe_layer_recompute`` is refused with full recompute; DeepEP needs the flex token dispatcher."""
    a = launch.args
    when = ' -- raised when the model is built (megatron-core TransformerConfig), after the distributed start-up'
    out = []
    gran = a.get('recompute_granularity')
    modules = a.get('recompute_modules') or []
    modules = [modules] if isinstance(modules, str) else list(modules)
    if gran == 'selective' and modules:
        invalid = sorted(set(modules) - set(RECOMPUTE_MODULES))
        if invalid:
            kept = [m for m in modules if m in RECOMPUTE_MODULES]
            out.append(
                _f(
                    ERROR,
                    'megatron.recompute-modules',
                    ['recompute_modules'],
                    f'Invalid choices for recompute_modules: {_set(invalid)}. Allowed modules are: '
                    f'{_set(RECOMPUTE_MODULES[:-1])}' + when,
                    f'--recompute_modules {" ".join(kept or ["core_attn"])}',
                    MCORE_TC,
                )
            )
        if 'moe_act' in modules and not a.get('moe_grouped_gemm'):
            out.append(
                _f(
                    ERROR,
                    'megatron.recompute-modules',
                    ['recompute_modules', 'moe_grouped_gemm'],
                    'moe_act in recompute_modules is only supported with moe_grouped_gemm.' + when,
                    '--moe_grouped_gemm true (or drop moe_act from --recompute_modules)',
                    MCORE_TC,
                )
            )
        if 'shared_experts' in modules and a.get('moe_shared_expert_overlap') and model:
            from ...memory.arch import Arch

            if Arch.from_config(model).shared_expert_intermediate:
                out.append(
                    _f(
                        ERROR,
                        'megatron.recompute-modules',
                        ['recompute_modules', 'moe_shared_expert_overlap'],
                        'shared_experts recompute cannot work with --moe-shared-expert-overlap.' + when,
                        '--moe_shared_expert_overlap false (or drop shared_experts from --recompute_modules)',
                        MCORE_TC,
                    )
                )
    if a.get('moe_layer_recompute') and gran == 'full':
        out.append(
            _f(
                ERROR,
                'megatron.recompute-modules',
                ['moe_layer_recompute', 'recompute_granularity'],
                'Do not set --moe-layer-recompute with full recompute granularity.' + when,
                '--moe_layer_recompute false (full recompute already recomputes the MoE layers)',
                MCORE_TC,
            )
        )
    if a.get('moe_enable_deepep') and (a.get('moe_token_dispatcher_type') or 'alltoall') != 'flex':
        out.append(
            _f(
                ERROR,
                'megatron.deepep-dispatcher',
                ['moe_enable_deepep', 'moe_token_dispatcher_type'],
                'DeepEP backend is only supported with flex token dispatcher.' + when,
                '--moe_token_dispatcher_type flex (or --moe_enable_deepep false)',
                MCORE_TC,
            )
        )
    return out


@rule('megatron.uneven-pp')
def uneven_pipeline(launch, plan, model):
    """megatron-core's TransformerConfig.__post_init__ "Uneven PP" checks (core 0.15 to 0.19), raised when ms-swift
    builds the model (``decoder_first/last_pipeline_num_layers`` become ``num_layers_in_first/last_pipeline_stage``,
    swift/megatron/model/utils.py ``get_mcore_model_config``): each edge stage has layers, divisible by the virtual
    stages; the middle stages split the rest evenly, and by the virtual stages. The messages keep the code's own
    spacing. PP 1 is ms-swift's own parse-time check (``megatron.pp-layers``)."""
    a = launch.args
    first, last = a.get('decoder_first_pipeline_num_layers'), a.get('decoder_last_pipeline_num_layers')
    pp = plan['parallel']['pp'] or 1
    if (first is None and last is None) or pp <= 1 or not model or a.get('pipeline_model_parallel_layout'):
        return []
    layers = model.get('num_hidden_layers')
    if not layers:
        return []
    vpp = plan['parallel'].get('vpp')
    when = ' -- raised when the model is built (megatron-core TransformerConfig), after the distributed start-up'

    def err(msg, knob, fix):
        return [_f(ERROR, 'megatron.uneven-pp', [knob], msg + when, fix, MCORE_TC)]

    rest, middle = layers, pp
    for name, n, edge in (
        (  # the order the code checks them in
            'decoder_first_pipeline_num_layers',
            first,
            'first',
        ),
        ('decoder_last_pipeline_num_layers', last, 'last'),
    ):
        if n is None:
            continue
        if n <= 0:
            return err(f'num_layers_in_{edge}_pipeline_stage must be larger than 0', name, f'{_flag(launch, name)} 1')
        if vpp and n % vpp:
            return err(
                f'number of layers at {edge} stage: {n}must be divisible by virtual pipelineparallel degree {vpp}',
                name,
                f'{_flag(launch, name)} {max(vpp, n - n % vpp)}',
            )
        rest -= n
        middle -= 1
    if middle and rest % middle:
        return err(
            f'number of layers at middle stage: {rest} must be divisible bythe middle pipeline model parallel size '
            f'{middle}',
            'decoder_first_pipeline_num_layers' if first is not None else 'decoder_last_pipeline_num_layers',
            f'edge stages that leave a multiple of {middle} layers to the middle stages',
        )
    if middle and vpp and (rest // middle) % vpp:
        return err(
            f'number of layers on each middle pipeline rank:{rest // middle} must be divisible by virtualpipeline '
            f'parallel degree {vpp}',
            'virtual_pipeline_model_parallel_size',
            f'{_flag(launch, "virtual_pipeline_model_parallel_size")} dividing {rest // middle}',
        )
    return []


@rule('megatron.vpp-beta', 'megatron.ref-model', 'megatron.tuner-switched')
def reference(launch, plan, model):
    """The KL term needs reference log-probs: with virtual pipeline stages the first rollout's
    ``assert len(ref_models) == 1, 'GRPO currently does not support VPP.'`` fails (grpo_trainer.py); full tuning
    builds the reference model even when beta is 0 (rlhf_mixin.py prepare_model)."""
    a = launch.args
    out = []
    vpp = plan['parallel'].get('vpp')
    beta = a.get('beta')
    beta = 0.04 if beta is None else beta  # _init_grpo's default
    if vpp and beta != 0:
        out.append(
            _f(
                ERROR,
                'megatron.vpp-beta',
                ['virtual_pipeline_model_parallel_size', 'beta'],
                (
                    f'GRPO currently does not support VPP. -- asserted at the first rollout (beta {beta} needs '
                    'reference '
                    f'log-probs; virtual_pipeline_model_parallel_size {vpp}), after the model has loaded'
                ),
                '--beta 0 (or drop --virtual_pipeline_model_parallel_size)',
                GRPO,
            )
        )
    if tuner(a) == 'full' and beta == 0:
        out.append(
            _f(
                INFO,
                'megatron.ref-model',
                ['beta', 'tuner_type'],
                (
                    'beta is 0 but full tuning still builds and loads a reference model (prepare_model: tuner_type '
                    'full); '
                    'its bf16 weights are counted in memory'
                ),
                None,
                'swift/megatron/trainers/rlhf_mixin.py',
            )
        )
    written = a.get('tuner_type') or a.get('train_type') or 'full'
    if written == 'full' and tuner(a) == 'lora':
        out.append(
            _f(
                INFO,
                'megatron.tuner-switched',
                ['tuner_type', 'adapters'],
                (
                    'adapters are given with tuner_type full: ms-swift trains LoRA instead ("Setting '
                    'args.tuner_type: lora"), '
                    'so no reference model is built and only the adapters are trained'
                ),
                '--tuner_type lora',
                ARGS,
            )
        )
    return out


@rule('megatron.heads-tp', 'megatron.layers-pp', 'megatron.experts-ep', 'megatron.vllm-heads')
def layout(launch, plan, model):
    """Model shape against the layout (Megatron-LM TransformerConfig / MoE layer checks): attention heads and KV
    heads by TP, layers by PP (and virtual stages), experts by EP; vLLM's heads by vllm_tensor_parallel_size."""
    if not model:
        return []
    from ...memory.arch import Arch

    a = Arch.from_config(model)
    par = plan['parallel']
    tp, pp, ep, vpp = par['tp'], par['pp'], par['ep'], par.get('vpp')
    args = launch.args
    out = []
    if a.heads % tp:
        out.append(
            _f(
                ERROR,
                'megatron.heads-tp',
                ['tensor_model_parallel_size'],
                (f'num_attention_heads ({a.heads}) must be a multiple of tensor_model_parallel_size ({tp}).'),
                f'--tensor_model_parallel_size {largest_divisor_at_most(math.gcd(a.heads, a.kv_heads), tp)}',
                MCORE_TC,
            )
        )
    elif a.kv_heads % tp:
        out.append(
            _f(
                ERROR,
                'megatron.heads-tp',
                ['tensor_model_parallel_size'],
                (f'num_query_groups ({a.kv_heads}) must be a multiple of tensor_model_parallel_size ({tp}).'),
                f'--tensor_model_parallel_size {largest_divisor_at_most(a.kv_heads, tp)}',
                MCORE_TC,
            )
        )
    uneven = (
        args.get('decoder_first_pipeline_num_layers') is not None
        or args.get('decoder_last_pipeline_num_layers') is not None
        or args.get('pipeline_model_parallel_layout')
    )
    if pp > 1 and not uneven:
        if a.layers % pp:
            out.append(
                _f(
                    ERROR,
                    'megatron.layers-pp',
                    ['pipeline_model_parallel_size'],
                    (
                        f'num_layers should be divisible by pipeline_model_parallel_size ({a.layers} layers, '
                        f'pipeline_model_parallel_size {pp})'
                    ),
                    '--decoder_first_pipeline_num_layers / --decoder_last_pipeline_num_layers for an uneven split',
                    MCORE_BLOCK,
                )
            )
        elif vpp and (a.layers // pp) % vpp:
            out.append(
                _f(
                    ERROR,
                    'megatron.layers-pp',
                    ['virtual_pipeline_model_parallel_size'],
                    (
                        f'num_layers_per_pipeline_rank should be divisible by vp_size ({a.layers // pp} layers per '
                        'rank, '
                        f'virtual_pipeline_model_parallel_size {vpp})'
                    ),
                    f'--virtual_pipeline_model_parallel_size {largest_divisor_at_most(a.layers // pp, vpp)}',
                    MCORE_BLOCK,
                )
            )
    if a.experts and a.experts % ep:
        out.append(
            _f(
                ERROR,
                'megatron.experts-ep',
                ['expert_model_parallel_size'],
                (f'num_moe_experts ({a.experts}) must be divisible by expert_model_parallel_size ({ep})'),
                f'--expert_model_parallel_size {largest_divisor_at_most(a.experts, ep)}',
                'Megatron-LM megatron/core/transformer/moe/moe_layer.py',
            )
        )
    vtp = args.get('vllm_tensor_parallel_size') or 1
    if args.get('vllm_mode') == 'colocate' and a.heads % vtp:
        out.append(
            _f(
                ERROR,
                'megatron.vllm-heads',
                ['vllm_tensor_parallel_size'],
                (f'Total number of attention heads ({a.heads}) must be divisible by tensor parallel size ({vtp}).'),
                None,
                'vllm/config/model.py verify_with_parallel_config',
            )
        )
    return out


def run(launch: MegatronLaunch, plan: dict, model: dict | None, hw=None) -> list[Finding]:
    out: list[Finding] = []
    for fn in RULES:
        out += fn(launch, plan, model, hw) if fn is world else fn(launch, plan, model)
    return out


declare(
    'grpo_recipes.frontends.megatron.check',
    (
        'megatron.memory',
        'megatron.oom-if-long-prompts',
        'megatron.vllm-startup-memory',
        'megatron.vllm-no-kv',
        'megatron.model-unavailable',
        'megatron.vllm-kv-one-sequence',
        'megatron.vllm-kv-concurrency',
    ),
)
