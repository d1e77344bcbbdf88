"""``grpo-guard``: check a ``swift rlhf`` GRPO launch before it spends a GPU-hour.

    grpo-guard check CONFIG [-- extra swift args]      plan + rules, in well under a second
    grpo-guard run CONFIG [-- extra swift args]        check, then exec `swift rlhf` (refuses on errors)
    grpo-guard [options] -- swift rlhf --flag value ... check + run for a bare command line
    grpo-guard check launcher.sh                       a launcher script as written (its env, its rollout)
    grpo-guard check CONFIG --rollout "CUDA_VISIBLE_DEVICES=6,7 swift rollout ..."   server mode
    grpo-guard check -- swift rollout ...              a rollout server on its own
    grpo-guard check -- accelerate launch ... train_grpo.py --use_vllm ...          a TRL launch
    grpo-guard validate CONFIG [-- extra swift args]   ms-swift's own parser, in a subprocess

Exit status: 0 clean/valid, 1 errors/invalid, 2 usage or input error.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import GuardError
from ..hardware import MAX_GPUS_PER_NODE
from .common import fail, package_version, parse_command, pipe_safe_stdout, split_passthrough

EPILOG = """examples:
  grpo-guard check recipes/examples/qwen2.5-7b-lora-colocate.yaml --gpus 2 --gpu-type A100-80G
  grpo-guard run recipes/examples/qwen2.5-7b-lora-colocate.yaml
  NPROC_PER_NODE=2 grpo-guard -- swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct ...
  grpo-guard validate recipes/examples/qwen2.5-7b-lora-colocate.yaml
  grpo-guard validate recipes/examples/qwen2.5-7b-lora-colocate.yaml -- --num_generations 4
  grpo-guard validate -- swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct ...

exit status: 0 clean/valid, 1 errors/invalid, 2 usage or input error"""


# One module per verb: (module of grpo_recipes.cli, its function), imported when the verb runs so that `validate`
# does not load the checker and `check` does not load the real parsers.
VERBS = {
    'check': ('check', 'run_check'),
    'run': ('check', 'run_run'),
    'validate': ('validate', 'run'),
    'trace': ('trace', 'run'),
    'calibrate': ('calibrate', 'run'),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog='grpo-guard',
        description='Pre-launch guard for ms-swift GRPO (`swift rlhf --rlhf_type grpo`).',
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument('--version', action='version', version=f'grpo-guard (grpo-recipes) {package_version()}')
    sub = p.add_subparsers(dest='cmd', metavar='COMMAND')
    v = sub.add_parser(
        'validate',
        help="run the framework's own argument parser on the launch (ms-swift 4.6's "
        "RLHFArguments, or the installed TRL's TrlParser)",
        description="Run the framework's own argument parser on the launch, in a subprocess: "
        'swift.utils.parse_args(RLHFArguments, argv) for swift rlhf (against a config-only model dir), '
        "TRL's TrlParser for a TRL launch. Reports unknown/renamed arguments with a suggestion and "
        "the framework's own validation messages.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for name, helptext in (
        ('check', 'derive the launch plan and run every rule (fast; no torch, no ms-swift)'),
        ('run', 'check, then exec `swift rlhf` with the same argv and environment'),
    ):
        c = sub.add_parser(
            name,
            help=helptext,
            description=helptext,
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        c.add_argument(
            'config',
            nargs='?',
            help='swift rlhf YAML/JSON config or a launcher .sh (omit and use '
            '`-- swift rlhf ...`, `-- accelerate launch ...`, or `-- bash train.sh ARGS` for a script that takes '
            'arguments)',
        )
        _hardware_args(c)
        c.add_argument('--json', action='store_true', help='print one JSON object (ok, findings, plan, ...)')
        c.add_argument(
            '--plot',
            metavar='FILE.svg|png',
            help="also draw each GPU's memory by phase against its capacity as a figure (matplotlib)",
        )
        if name == 'run':
            c.add_argument('--force', action='store_true', help='launch even if the check finds errors')
    t = sub.add_parser(
        'trace',
        help="trace one training step of the launch on fake tensors: the trainer's "
        'memory per category, from the real model code (imports torch; about 10 s for a 7B model)',
        description='Build the model class from config.json (no weights), add LoRA as the launch '
        'does, and run forward, the GRPO loss, backward and two AdamW steps on fake tensors, '
        'counting the bytes autograd and the optimizer keep alive. Prints the traced peak next to '
        "the analytic memory model's figure for the same quantity.",
    )
    t.add_argument('config', nargs='?', help='swift rlhf YAML/JSON config or launcher .sh (or `-- swift rlhf ...`)')
    t.add_argument(
        '--model-config',
        metavar='DIR',
        help="a dir holding the model's config.json (or the file), or a hub id (org/name)",
    )
    t.add_argument('--gpus', type=int, metavar='N', help='physical GPUs per node (for the plan)')
    t.add_argument('--json', action='store_true', help='print one JSON object (traced_peak_gib, model_peak_gib, ...)')
    t.add_argument('--force', action='store_true', help='trace a launch even when grpo-guard check finds errors in it')
    t.add_argument(
        '--snapshot',
        metavar='FILE.pickle',
        help="also write the traced step in PyTorch's memory-snapshot "
        'format (torch.cuda.memory._snapshot()), to open in https://pytorch.org/memory_viz',
    )
    cal = sub.add_parser(
        'calibrate',
        help='score the memory model on published measurements (JSON lines)',
        description='Predict every case of a calibration file (one JSON object a line: id, kind, '
        'model_config, gpu, config, outcome; the schema is in docs/calibration.md) and compare with '
        'what was observed.',
    )
    cal.add_argument('cases', help='JSON-lines file of cases, e.g. memory_cases.jsonl (published measurements)')
    cal.add_argument('--json', action='store_true', help='print one JSON object')
    cal.add_argument(
        '--replay',
        action='store_true',
        help="torch's reserve of each GRPO training case from its traced step's replay, as check --replay plans it "
        '(needs torch, transformers and peft; seconds per case)',
    )
    v.add_argument(
        'config',
        nargs='?',
        help='swift rlhf YAML/JSON config or a launcher .sh (omit and use '
        '`-- swift rlhf ...`, `-- accelerate launch ...`)',
    )
    v.add_argument('--json', action='store_true', help='print one JSON object')
    v.add_argument('--timeout', type=float, default=900.0, help='seconds to wait for the parser (default 900)')
    v.add_argument(
        '--model-config',
        metavar='DIR',
        help="a dir holding the model's config.json (or the file) "
        'when the model is neither local nor in the HF/ModelScope cache nor bundled: ms-swift parses '
        'against it',
    )
    v.add_argument(
        '--gpus',
        type=int,
        metavar='N',
        help='physical GPUs per node: the process count of a launch that '
        'starts one per visible GPU (default: nvidia-smi, or CUDA_VISIBLE_DEVICES)',
    )
    for c in (v, sub.choices['check'], sub.choices['run']):
        c.add_argument(
            '--swift-version',
            metavar='V',
            help='ms-swift launches: the ms-swift release the launch will '
            "run (default: the installed one); check reads it with that release's own arguments "
            "(3.0 to 4.6; a newer one as 4.6's)",
        )
        c.add_argument(
            '--env',
            action='append',
            metavar='NAME=VALUE',
            help='a value the cluster sets for the launch '
            "(a scheduler's or launcher's variable the script uses, e.g. --env NNODES=2 --env RANK=0); "
            'repeatable; added to this environment for reading the launch',
        )
        c.add_argument(
            '--trl-version',
            metavar='V',
            help='TRL launches: the TRL release the launch will run (default: '
            'the installed one); older releases keep the names they had (e.g. --vllm_device before 0.16)',
        )
    return p


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f'{text!r} is not a positive number of tokens')
    return n


def _hardware_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group('hardware (default: nvidia-smi if present, else unknown)')
    g.add_argument('--gpus', type=int, metavar='N', help='physical GPUs per node')
    g.add_argument(
        '--gpu-type',
        metavar='T',
        help='GPU model, e.g. A100-80G, A100-40G, H100, or the name nvidia-smi '
        'prints ("NVIDIA A100-SXM4-40GB"); a name that could be several cards is refused',
    )
    g.add_argument('--rollout-gpus', metavar='IDS', help='server mode: GPU ids of `swift rollout` (e.g. 4,5)')
    p.add_argument(
        '--data-stats',
        metavar='JSON',
        help='`grpo-data stats DATA --json` output: plan memory with '
        "the data's real prompt lengths and check max_length against them",
    )
    p.add_argument(
        '--pass-rate',
        type=float,
        metavar='P',
        help="the model's pass rate on the data (0-1, e.g. its "
        'benchmark score): predict the share of all-equal reward groups (rule signal.*)',
    )
    p.add_argument(
        '--completion-mean',
        type=_positive_int,
        metavar='TOKENS',
        help="the completions' mean length "
        "(e.g. completions/mean_length from a run's log): an OOM below it is a refusal; without it a "
        "reasoning model's completions are planned at max_completion_length; also the predicted step "
        "time's mean",
    )
    p.add_argument(
        '--replay',
        action='store_true',
        help="plan torch's reserve for the training step by tracing it on fake tensors and replaying it through the "
        'caching-allocator model, as grpo-guard trace does, at the planned prompt and three shorter ones (needs '
        'torch, transformers and peft; about a minute for a 7B model on 2 cores), in place of the closed form',
    )
    p.add_argument(
        '--fastest',
        action='store_true',
        help='rank the configurations that fit (micro-batch split, '
        'colocate or server, vLLM TP, checkpointing, sleep level) by predicted time per prompt',
    )
    g.add_argument(
        '--gpu-mem',
        type=float,
        metavar='GIB',
        help='GPU capacity in GiB as torch reports it (overrides the --gpu-type catalogue)',
    )
    p.add_argument(
        '--write-fix',
        metavar='OUT',
        help='write the launch with the first fix applied to OUT: the config with its keys changed (comments kept), '
        'or the patched command line; never over the input',
    )
    p.add_argument(
        '--verify',
        action='store_true',
        help="also put the proposed memory fix through ms-swift's real parser (about 10 s)",
    )
    p.add_argument(
        '--rollout',
        metavar='CMD',
        help="server mode: the rollout server's command as typed, e.g. "
        '"CUDA_VISIBLE_DEVICES=6,7 swift rollout --model M --vllm_data_parallel_size 2" (read, never run)',
    )
    p.add_argument(
        '--model-config',
        metavar='DIR',
        help="a dir holding the model's config.json (or the file), or the hub id (org/name) of the model the "
        "launch's model dir is a copy of, when the model is neither local nor in the HF/ModelScope cache",
    )
    p.add_argument(
        '--allow-unchecked',
        action='store_true',
        help='exit 0 (and let `run` launch) when the rules '
        'pass but memory could not be checked (no config.json, unknown GPU)',
    )


def _check_numbers(opts) -> None:
    """Numbers argparse accepts (nan, inf, 0, negatives, 10**400) that no command can use: one line, exit 2."""
    gpus = getattr(opts, 'gpus', None)
    if gpus is not None and not 1 <= gpus <= MAX_GPUS_PER_NODE:
        raise GuardError(f'--gpus {gpus}: must be the physical GPUs per node, 1 to {MAX_GPUS_PER_NODE}')
    timeout = getattr(opts, 'timeout', None)
    if timeout is not None and not 0 < timeout <= 86400:  # NaN fails every comparison
        raise GuardError(f'--timeout {timeout}: must be seconds to wait for the parser, above 0 and at most 86400')


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = ('check', 'run', 'validate', 'calibrate', 'trace')
    first = next((a for a in argv if not a.startswith('-') or a == '--'), None)
    if argv and first == '--' and not any(a in ('-h', '--help', '--version') for a in argv[: argv.index('--')]):
        argv = ['run', *argv]  # grpo-guard [options] -- swift rlhf ...: check and run a bare command line
    elif argv and argv[0].startswith('-') and argv[0] not in ('-h', '--help', '--version') and first not in commands:
        argv = ['run', *argv]
    ours, extra = split_passthrough(argv)
    opts = parse_command(build_parser(), ours)
    if isinstance(opts, int):
        return opts
    try:
        _check_numbers(opts)
        verb = VERBS.get(opts.cmd)
        if verb is not None:
            module, function = verb
            with pipe_safe_stdout():  # `| head`: the exit status stays the verdict's
                return getattr(importlib.import_module(f'{__package__}.{module}'), function)(opts, extra)
    except GuardError as e:
        return fail(str(e), e.exit_code)
    except UnicodeDecodeError as e:  # a reader without its own check (calibrate's cases)
        where = getattr(opts, 'config', None) or getattr(opts, 'cases', None) or 'the input'
        return fail(f'{where}: not valid UTF-8 at byte {e.start}; save the file as UTF-8', 2)
    except (ValueError, argparse.ArgumentError) as e:
        from ..swift_args import ArgumentError

        if not isinstance(e, (ArgumentError, argparse.ArgumentError)):
            raise
        where = getattr(opts, 'config', None) or 'the launch'
        return fail(f'{where}: swift rlhf rejects the arguments: {e}', 1)
    except RecursionError:  # a file nested deeper than a reader can recurse
        where = getattr(opts, 'config', None) or getattr(opts, 'cases', None) or 'a file the launch reads'
        return fail(
            f'{where}: nested too deeply to read (YAML/JSON lists or mappings inside each other); no config '
            f'nests more than a few levels',
            2,
        )
    except KeyboardInterrupt:
        return fail('interrupted', 130)
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
    except OSError as e:  # a path the system refuses (a name too long, a permission): name it, one line
        return fail(f'{e.filename or "input"}: {e.strerror or e}', 2)
    return 2


if __name__ == '__main__':
    sys.exit(main())
