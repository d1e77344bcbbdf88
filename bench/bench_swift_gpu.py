#!/usr/bin/env python3
"""Run real ``swift rlhf --rlhf_type grpo`` launches on one CUDA GPU with random-weight models, and write what they
used as cases of the calibration schema (../shared/calibration/README.md), for ``grpo-guard calibrate``.

Each launch is a recipe's training shape on one GPU (default: every recipe in recipes/): its tuner (LoRA rank,
alpha, targets, or full), dtype, gradient checkpointing, micro-batch, ``num_generations``, ``max_length``,
``max_completion_length``, loss settings and reward functions, with rollouts by HF generate (``--use_vllm false``:
no vLLM wheel fits the GPU machine, ../shared/calibration/gpu-h100-2026-11-24/README.md). What one GPU cannot keep
is dropped and printed: vLLM's settings, sleep and offload, DeepSpeed (a single process has nothing to shard across),
and the accumulation, which is cut to the fewest micro-batches whose completions fill whole prompt groups (a step's
peak is one micro-batch's). Models are built from ``config.json`` with random weights (no download): the recipe's
own config (grpo_recipes/model_configs/) and the bundled Qwen2.5 tokenizer. A GPTQ int4 checkpoint cannot be built
that way (its packed weights and scales come out of a quantiser run), so those launches are skipped with the reason.

Per launch it records ms-swift's logged ``memory(GiB)`` (``torch.cuda.max_memory_reserved``; the largest over the
steps: AdamW's states appear at the first optimizer step) and the device's peak used memory as nvidia-smi shows it
(NVML v2's ``used``, without the driver's reserved memory), polled every 0.1 s in a thread (pynvml, else
``nvidia-smi``); the random models are built in a child process, so no second CUDA context is counted.
``--emulate-gib 40`` emulates a 40 GB card on a larger one with
``torch.cuda.set_per_process_memory_fraction``, set from an ms-swift ``--external_plugins`` file: ms-swift 4.6
imports those files while it parses its arguments (``BaseArguments._import_external_plugins``,
swift/arguments/base_args/base_args.py), in the training process, before the model is loaded, and only there (a
sitecustomize would also run in every helper process). The fraction caps what torch's allocator may reserve; the
CUDA context lies outside it, so NVML's figure can exceed the emulated card by the context.

    python bench/bench_swift_gpu.py --dry-run                 # every launch's argv and environment, no GPU
    python bench/bench_swift_gpu.py --out cases.jsonl         # run them all (needs a GPU, ms-swift 4.6)
    python bench/bench_swift_gpu.py --only lora-2xa100-40g --emulate-gib 40 --alloc default,expandable

The GPU machine needs the wheels in ../shared/calibration/gpu-h100-2026-11-24/wheels.txt (installed --no-deps);
the bnb QLoRA recipes need bitsandbytes too. Prints one line per launch; asserts nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TOKENIZER = ROOT / 'data_tools' / 'tokenizer'
SAMPLE = ROOT / 'data_tools' / 'sample' / 'gsm8k_train_300.jsonl'
MiB = 2**20
# The recipe keys that make the training step's shape (kept as written); everything else is left out or set below.
SHAPE_KEYS = (
    'rlhf_type',
    'tuner_type',
    'lora_rank',
    'lora_alpha',
    'lora_dropout',
    'target_modules',
    'torch_dtype',
    'quant_method',
    'quant_bits',
    'bnb_4bit_compute_dtype',
    'bnb_4bit_quant_type',
    'bnb_4bit_use_double_quant',
    'beta',
    'loss_type',
    'epsilon',
    'epsilon_high',
    'num_generations',
    'per_device_train_batch_size',
    'max_length',
    'max_completion_length',
    'truncation_strategy',
    'gradient_checkpointing',
    'temperature',
    'reward_funcs',
    'optim',
    'learning_rate',
    'use_liger_kernel',
    'padding_free',
)
# Settings every launch gets: a short, quiet, local run (as ../shared/calibration/gpu-h100-2026-11-24's runs).
FIXED = [
    '--use_vllm',
    'false',
    '--model_type',
    'qwen2',
    '--template',
    'qwen2_5',
    '--logging_steps',
    '1',
    '--save_strategy',
    'no',
    '--split_dataset_ratio',
    '0',
    '--report_to',
    'none',
    '--dataloader_num_workers',
    '0',
    '--dataset_num_proc',
    '1',
]
ALLOCATORS = {'default': None, 'expandable': 'expandable_segments:True'}
PLUGIN = '''"""Written by bench/bench_swift_gpu.py: cap torch's allocator at GRPO_BENCH_EMULATE_GIB on this card."""
import os
import torch
_cap = float(os.environ['GRPO_BENCH_EMULATE_GIB']) * 2 ** 30
torch.cuda.set_per_process_memory_fraction(min(1.0, _cap / torch.cuda.get_device_properties(0).total_memory), 0)
'''
# Loaded into every launch the same way (--external_plugins): the training process's own torch.cuda peaks, allocated
# and reserved, written to GRPO_BENCH_PEAKS every 0.5 s by a daemon thread, so a case holds the allocated peak beside
# the reserved one (ms-swift logs only the reserved: its memory(GiB)) and the allocator's reserve can be told apart.
PEAKS_PLUGIN = '''"""Written by bench/bench_swift_gpu.py: this process's torch.cuda peaks, to GRPO_BENCH_PEAKS."""
import json
import os
import threading
import time

import torch

# memory_stats() keys kept beside the peaks: how the reserve grew (device mallocs and frees, retries after an OOM,
# inactive split bytes), so the reserve's history is visible, not only its peak
STATS = (
    'num_alloc_retries', 'num_ooms', 'num_device_alloc', 'num_device_free', 'inactive_split_bytes.all.peak',
    'allocated_bytes.large_pool.peak', 'reserved_bytes.large_pool.peak', 'reserved_bytes.small_pool.peak',
    'segment.all.peak', 'oversize_segments.peak',
)


def _segments():
    """The segments now held, largest first: (size, allocated in it), with the allocated and reserved totals."""
    segs = sorted(((s['total_size'], s['allocated_size']) for s in torch.cuda.memory_snapshot()), reverse=True)
    return {'segments': segs[:60], 'n_segments': len(segs), 'allocated_now': torch.cuda.memory_allocated(0)}


def _poll(path):
    last_reserved, grew = 0, {}
    while True:
        if torch.cuda.is_initialized():
            peaks = {'allocated': torch.cuda.max_memory_allocated(0), 'reserved': torch.cuda.max_memory_reserved(0)}
            if peaks['reserved'] > last_reserved:  # the reserve grew: what it holds now, segment by segment
                last_reserved = peaks['reserved']
                try:
                    grew = {'at_reserved': last_reserved, **_segments()}
                except Exception as e:  # noqa: BLE001 - a bench probe; the peaks above still count
                    grew = {'error': repr(e)}
            stats = torch.cuda.memory_stats(0)
            extra = {'stats': {k: stats.get(k) for k in STATS}, 'at_reserved_peak': grew}
            for name, data in ((path, peaks), (path + '.stats', extra)):
                with open(name + '.tmp', 'w') as f:
                    json.dump(data, f)
                os.replace(name + '.tmp', name)
        time.sleep(0.5)


def _figures():
    """torch's allocated and reserved bytes and their peaks now ({} on CPU: the record alone is written)."""
    if not torch.cuda.is_initialized():
        return {}
    return dict(allocated=torch.cuda.memory_allocated(0), reserved=torch.cuda.memory_reserved(0),
                max_allocated=torch.cuda.max_memory_allocated(0), max_reserved=torch.cuda.max_memory_reserved(0))


def _append(path, rec):
    with open(path, 'a') as f:
        f.write(json.dumps(rec) + '\\n')


def _record_windows(path):
    """Each training micro-batch's logits window as ms-swift collates it (collate_to_grpo_micro_batch with
    use_logits_to_keep, after generation and before the no-grad passes), its prompts' spread and longest completion,
    and the allocator's figures at that moment: one JSON line each, to path + '.windows'."""
    try:
        import swift.rlhf_trainers.grpo_trainer as gt
        orig = gt.collate_to_grpo_micro_batch
    except (ImportError, AttributeError):  # an ms-swift without it: no windows recorded
        return

    def collate(samples, template, **kw):
        model_inputs, batch = orig(samples, template, **kw)
        if kw.get('use_logits_to_keep'):
            prompts = [next((i for i, x in enumerate(s.encoded['labels']) if x != -100), 0) for s in samples]
            rec = {
                'logits_to_keep': int(batch.logits_to_keep),
                'micro_batch': len(samples),
                'prompt_min': min(prompts),
                'prompt_max': max(prompts),
                'completion_max': max(len(s.encoded['labels']) - p for s, p in zip(samples, prompts)),
                'sequence_max': max(len(s.encoded['labels']) for s in samples),
            }
            _append(path + '.windows', {**rec, **_figures()})
        return model_inputs, batch

    gt.collate_to_grpo_micro_batch = collate


def _record_phases(path):
    """The allocator's figures where one phase of the GRPO step hands over to the next: before and after generation
    (_generate_completions), at each micro-batch's loss (after the step's no-grad old/ref passes), and after each
    training_step (its backward; the optimizer steps after it returns), and each log-probabilities forward
    (_get_per_token_logps_and_entropies, 'logps', with 'grad': whether autograd records it). One JSON line each, to
    path + '.phases'; the peaks in each line say which phase first reached the run's reserve."""
    try:
        import swift.rlhf_trainers.grpo_trainer as gt
        cls = gt.GRPOTrainer
        names = ('_generate_completions', 'compute_loss', 'training_step', '_get_per_token_logps_and_entropies')
        origs = {n: getattr(cls, n) for n in names}
    except (ImportError, AttributeError):
        return

    def note(phase, **extra):
        _append(path + '.phases', {'phase': phase, **extra, **_figures()})

    def generate(self, *a, **kw):
        note('generate_start')
        out = origs['_generate_completions'](self, *a, **kw)
        note('generate_end')
        return out

    def loss(self, *a, **kw):
        note('loss_start')
        return origs['compute_loss'](self, *a, **kw)

    def step(self, *a, **kw):
        out = origs['training_step'](self, *a, **kw)
        note('backward_end')
        return out

    def logps(self, *a, **kw):
        out = origs['_get_per_token_logps_and_entropies'](self, *a, **kw)
        note('logps', grad=torch.is_grad_enabled())
        return out

    cls._generate_completions, cls.compute_loss, cls.training_step = generate, loss, step
    cls._get_per_token_logps_and_entropies = logps


if os.environ.get('GRPO_BENCH_PEAKS'):
    threading.Thread(target=_poll, args=(os.environ['GRPO_BENCH_PEAKS'],), daemon=True).start()
    _record_windows(os.environ['GRPO_BENCH_PEAKS'])
    _record_phases(os.environ['GRPO_BENCH_PEAKS'])
'''


@dataclass
class Run:
    """One launch of the harness."""

    name: str
    """``<recipe>`` or ``<recipe>+expandable`` (the allocator variant)."""
    model: str
    """The recipe's model id; the random model is built under the workdir with its last part as the dir name."""
    model_config: dict
    argv: list[str] = field(default_factory=list)
    """What follows ``swift rlhf``."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables set for the launch on top of the caller's environment."""
    dropped: list[str] = field(default_factory=list)
    """Recipe settings one GPU does not keep (printed with the launch)."""
    skip: str | None = None
    """Why the launch cannot run (GPTQ int4 cannot be random-built), None when it can."""


def _flag_values(mapping: dict) -> list[str]:
    out: list[str] = []
    for k, v in mapping.items():
        out.append(f'--{k}')
        out += [str(x) for x in v] if isinstance(v, list) else [str(v).lower() if isinstance(v, bool) else str(v)]
    return out


def _launch_argv(workdir: Path, model: str, shape: dict, fixed: list[str], steps: int, dataset: Path, name: str):
    """What follows ``swift rlhf`` for one launch: the random model, the shape as written, the fixed settings, the
    accumulation cut to the fewest micro-batches whose completions fill whole prompt groups (world 1), the steps,
    data and output dir. Returns (argv, accumulation)."""
    mb, ng = int(shape.get('per_device_train_batch_size', 1)), int(shape.get('num_generations', 8))
    ga = ng // math.gcd(mb, ng)
    argv = [
        '--model',
        str(workdir / 'models' / Path(model).name),
        *_flag_values(shape),
        *fixed,
        '--gradient_accumulation_steps',
        str(ga),
        '--max_steps',
        str(steps),
        '--dataset',
        str(dataset),
        '--output_dir',
        str(workdir / 'output' / name.replace('/', '__')),
    ]
    return argv, ga


def recipe_runs(
    workdir: Path,
    dataset: Path,
    steps: int = 2,
    only: list[str] | None = None,
    allocators: tuple[str, ...] = ('default',),
    emulate_gib: float | None = None,
) -> list[Run]:
    """The launches for every recipe (or those whose name contains one of ``only``), one per allocator."""
    from grpo_recipes.frontends.swift.reader import read_config_file
    from grpo_recipes.models import load_model_config
    from grpo_recipes.recipes import discover

    runs: list[Run] = []
    for recipe in discover():
        if not _chosen(recipe.name, only, []):
            continue
        raw = read_config_file(recipe.path)
        model = str(raw['model'])
        cfg = load_model_config(model)
        quant = (cfg.get('quantization_config') or {}).get('quant_method')
        shape = {k: raw[k] for k in SHAPE_KEYS if k in raw}
        dropped = sorted(
            k
            for k in raw
            if k not in SHAPE_KEYS and k not in ('model', 'dataset', 'output_dir', 'gradient_accumulation_steps')
        )
        for alloc in allocators:
            name = recipe.name + ('' if alloc == 'default' else f'+{alloc}')
            argv, ga = _launch_argv(workdir, model, shape, FIXED, steps, dataset, name)
            env = {'CUDA_VISIBLE_DEVICES': '0'}
            if ALLOCATORS[alloc]:
                env['PYTORCH_CUDA_ALLOC_CONF'] = ALLOCATORS[alloc]
            if emulate_gib:
                argv += ['--external_plugins', str(workdir / 'emulate_card.py')]
                env['GRPO_BENCH_EMULATE_GIB'] = str(emulate_gib)
            skip = None
            if recipe.command:
                skip = (
                    f'run by `{" ".join(recipe.command)}`, not `swift rlhf`: this harness measures the swift rlhf '
                    f'trainer step'
                )
            elif quant in ('gptq', 'awq'):
                skip = (
                    f'{quant.upper()} int4 checkpoint: its packed weights and scales come from a quantiser run and '
                    f'cannot be built at random from config.json'
                )
            runs.append(Run(name, model, cfg, argv, env, dropped + [f'gradient_accumulation_steps -> {ga}'], skip))
    return runs


# Shapes that are no recipe's, run with ``--grid``: a holdout for the trainer terms (models, tuners, micro-batches and
# allocators the recipes do not use; chosen before any was run, none of them a calibration case's shape).
GRID = (
    # (name, model id in the catalogue, model_type, template, shape, allocator)
    (
        'grid/qwen2.5-1.5b-full-bs32-c512',
        'Qwen/Qwen2.5-1.5B-Instruct',
        'qwen2',
        'qwen2_5',
        {'tuner_type': 'full', 'per_device_train_batch_size': 32, 'max_completion_length': 512},
        'default',
    ),
    (
        'grid/qwen2.5-1.5b-full-bs32-c512+expandable',
        'Qwen/Qwen2.5-1.5B-Instruct',
        'qwen2',
        'qwen2_5',
        {'tuner_type': 'full', 'per_device_train_batch_size': 32, 'max_completion_length': 512},
        'expandable',
    ),
    (
        'grid/qwen3-1.7b-full-bs16-c512',
        'Qwen/Qwen3-1.7B',
        'qwen3',
        'qwen3',
        {'tuner_type': 'full', 'per_device_train_batch_size': 16, 'max_completion_length': 512},
        'default',
    ),
    (
        'grid/qwen2.5-3b-lora-bs16-c512',
        'Qwen/Qwen2.5-3B-Instruct',
        'qwen2',
        'qwen2_5',
        {
            'tuner_type': 'lora',
            'lora_rank': 16,
            'lora_alpha': 32,
            'target_modules': 'all-linear',
            'per_device_train_batch_size': 16,
            'max_completion_length': 512,
        },
        'default',
    ),
    # Added 2026-11-27, before they ran, as a holdout for full fine-tuning of a small model at a large micro-batch
    # (a tied-embedding model; no calibration case has this model or these shapes).
    (
        'grid/qwen2.5-0.5b-full-bs32-c512',
        'Qwen/Qwen2.5-0.5B-Instruct',
        'qwen2',
        'qwen2_5',
        {'tuner_type': 'full', 'per_device_train_batch_size': 32, 'max_completion_length': 512},
        'default',
    ),
    (
        'grid/qwen2.5-0.5b-full-bs32-c512+expandable',
        'Qwen/Qwen2.5-0.5B-Instruct',
        'qwen2',
        'qwen2_5',
        {'tuner_type': 'full', 'per_device_train_batch_size': 32, 'max_completion_length': 512},
        'expandable',
    ),
    (
        'grid/qwen2.5-0.5b-full-bs16-c1024',
        'Qwen/Qwen2.5-0.5B-Instruct',
        'qwen2',
        'qwen2_5',
        {'tuner_type': 'full', 'per_device_train_batch_size': 16, 'max_completion_length': 1024},
        'default',
    ),
)
# What every grid launch shares (as the recipes write it).
GRID_COMMON = {
    'rlhf_type': 'grpo',
    'torch_dtype': 'bfloat16',
    'beta': 0.04,
    'num_generations': 8,
    'max_length': 256,
    'truncation_strategy': 'delete',
    'gradient_checkpointing': True,
    'temperature': 1.0,
    'reward_funcs': 'accuracy',
    'learning_rate': 1e-5,
}


def _chosen(name: str, only: list[str] | None, names: list[str]) -> bool:
    """Whether ``--only`` picks ``name``: an entry that is a whole name picks that one alone, else it picks every
    name that contains it."""
    return not only or any(o == name if o in names else o in name for o in only)


def grid_runs(workdir: Path, dataset: Path, steps: int = 2, only: list[str] | None = None) -> list[Run]:
    """The ``GRID`` launches (or those whose name contains one of ``only``)."""
    from grpo_recipes.models import load_model_config

    runs: list[Run] = []
    for name, model, model_type, template, shape, alloc in GRID:
        if not _chosen(name, only, [g[0] for g in GRID]):
            continue
        fixed = list(FIXED)
        fixed[fixed.index('--model_type') + 1] = model_type
        fixed[fixed.index('--template') + 1] = template
        argv, ga = _launch_argv(workdir, model, {**GRID_COMMON, **shape}, fixed, steps, dataset, name)
        env = {'CUDA_VISIBLE_DEVICES': '0'}
        if ALLOCATORS[alloc]:
            env['PYTORCH_CUDA_ALLOC_CONF'] = ALLOCATORS[alloc]
        runs.append(Run(name, model, load_model_config(model), argv, env, [f'gradient_accumulation_steps -> {ga}']))
    return runs


def build_model(out: Path, config: dict, tokenizer: Path) -> None:
    """A random-weight model dir from config.json (bf16, on the GPU) plus the tokenizer files, built in a child
    process: a process that touches the GPU keeps its CUDA context until it exits (617 MiB on an H100 80GB, 2026-11-27),
    and NVML would count this one's beside the launch's (before 2026-11-27 the bench built models in its own process;
    those cases state it, ``outcome.other_processes_mib``)."""
    if (out / '.complete').exists():
        return
    subprocess.run(
        [sys.executable, __file__, '--build-model', str(out), json.dumps(config), str(tokenizer)], check=True, cwd=ROOT
    )


def _build_model_here(out: Path, config: dict, tokenizer: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if (out / '.complete').exists():  # a dir left by a build that stopped part-way (disk full) is built again
        return
    shutil.rmtree(out, ignore_errors=True)
    c = {k: v for k, v in config.items() if k != 'quantization_config'}
    hf = AutoConfig.for_model(c.pop('model_type'), **c)
    with torch.device('cuda'):
        model = AutoModelForCausalLM.from_config(hf, dtype=torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, max_shard_size='4GB')
    for f in tokenizer.iterdir():
        if f.is_file() and f.suffix in ('.json', '.txt'):
            shutil.copy(f, out / f.name)
    # Qwen2.5's generation settings: <|im_end|> and <|endoftext|> stop, sampling on
    (out / 'generation_config.json').write_text(
        json.dumps(
            {'bos_token_id': 151643, 'eos_token_id': [151645, 151643], 'pad_token_id': 151643, 'do_sample': True}
        )
    )
    (out / '.complete').write_text('')
    del model
    torch.cuda.empty_cache()


class PeakPoller(threading.Thread):
    """The device's used memory (MiB) every 0.1 s, as nvidia-smi's memory.used shows it: NVML's v2 ``used`` through
    pynvml, else ``nvidia-smi``. NVML's v1 ``used`` also counts the driver's reserved memory (480 MiB on an H100 80GB
    with driver 580.159.04, 2026-11-27), which CUDA's total and the guard's card capacity leave out; this poller read
    v1 before 2026-11-27, and those cases state it (``outcome.driver_reserved_mib``)."""

    def __init__(self, index: int = 0):
        super().__init__(daemon=True)
        self.index, self.peak_mib, self._halt = index, 0.0, threading.Event()

    def _used(self):
        try:
            import pynvml

            pynvml.nvmlInit()
            h = pynvml.nvmlDeviceGetHandleByIndex(self.index)
            pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
            return lambda: pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2).used / MiB
        except Exception:  # noqa: BLE001 - pynvml (or its v2 call) is optional

            def smi():
                r = subprocess.run(
                    ['nvidia-smi', '--query-gpu=memory.used', '--format=csv,noheader,nounits', '-i', str(self.index)],
                    capture_output=True,
                    text=True,
                )
                return float(r.stdout.strip().splitlines()[0])

            return smi

    def run(self):
        try:
            used = self._used()
            while not self._halt.is_set():
                self.peak_mib = max(self.peak_mib, used())
                self._halt.wait(0.1)
        except Exception:  # noqa: BLE001 - no NVML and no nvidia-smi: no device figure
            self.peak_mib = -1.0

    def stop(self) -> float:
        self._halt.set()
        self.join(timeout=5)
        return self.peak_mib


MEMORY_RE = re.compile(r"'memory\(GiB\)':\s*'?([0-9.]+)'?")
SPEED_RE = re.compile(r"'train_speed\(s/it\)':\s*'?([0-9.]+)'?")
OOM_RE = re.compile(r'CUDA out of memory|OutOfMemoryError')


def read_log(text: str) -> dict:
    """ms-swift's log -> the largest ``memory(GiB)`` over its steps, how many steps logged it, and an OOM."""
    values = [float(v) for v in MEMORY_RE.findall(text)]
    return {
        'memory_gib': max(values) if values else None,
        'steps_logged': len(values),
        'seconds_per_step': [float(v) for v in SPEED_RE.findall(text)],
        'oom': bool(OOM_RE.search(text)),
    }


def _typed(v: str):
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return {'true': True, 'false': False}.get(v.lower(), v)


def argv_config(argv: list[str]) -> dict:
    """``--k v [v ...]`` -> {k: value} in the calibration schema's ``config`` (lists stay lists)."""
    out: dict = {}
    key = None
    for a in argv:
        if a.startswith('--'):
            key = a[2:]
            out[key] = None
        elif key is not None:
            v = _typed(a)
            out[key] = v if out[key] is None else (out[key] if isinstance(out[key], list) else [out[key]]) + [v]
    return out


MEMORY_FIELDS = (
    'architectures',
    'model_type',
    'hidden_size',
    'intermediate_size',
    'num_hidden_layers',
    'num_attention_heads',
    'num_key_value_heads',
    'head_dim',
    'vocab_size',
    'tie_word_embeddings',
    'max_position_embeddings',
    'torch_dtype',
    'quantization_config',
)


def to_case(run: Run, result: dict, gpu: dict, versions: dict, date: str, prompt_tokens: dict | None = None) -> dict:
    """One result in the schema of ../shared/calibration/memory_cases.jsonl (as grpo_recipes/calibrate.py reads it);
    ``prompt_tokens`` is the data's prompt lengths (``dataset_prompt_tokens``)."""
    config = {
        k: v
        for k, v in argv_config(run.argv).items()
        if k not in ('model', 'output_dir', 'external_plugins', 'dataset')
    }
    config['model'] = run.model
    emulated = run.env.get('GRPO_BENCH_EMULATE_GIB')
    outcome: dict = {
        'ran_ok': result['rc'] == 0 and not result['oom'],
        'oom': result['oom'],
        'measure': f'ms-swift memory(GiB) (torch.cuda.max_memory_reserved), max over '
        f'{result["steps_logged"]} logged steps',
    }
    if result['memory_gib'] is not None:
        outcome['peak_gib_per_gpu'] = result['memory_gib']
    if result['nvml_peak_mib'] > 0:  # -1: no NVML and no nvidia-smi; nvidia-smi's basis (PeakPoller)
        outcome['nvidia_smi_used_mib'] = round(result['nvml_peak_mib'])
    if result.get('torch_peaks_gib'):  # the training process's torch.cuda.max_memory_allocated / _reserved
        outcome['torch_max_allocated_gib'] = result['torch_peaks_gib'].get('allocated')
        outcome['torch_max_reserved_gib'] = result['torch_peaks_gib'].get('reserved')
    if result.get('torch_allocator'):  # memory_stats() counters and the segments held when the reserve last grew
        outcome['torch_allocator'] = result['torch_allocator']
    if result.get('logits_windows'):  # each training micro-batch's logits_to_keep, in order (the plugin's .windows)
        outcome['logits_windows'] = result['logits_windows']
    if result.get('phases'):  # the allocator at each phase boundary: generation, loss, backward (the plugin's .phases)
        outcome['phases'] = result['phases']
    if result.get('seconds_per_step'):  # ms-swift's train_speed(s/it) at each logged step (a running average)
        outcome['train_speed_s_per_it'] = result['seconds_per_step']
    return {
        'id': case_id(run.name, run.argv, emulated),
        'kind': 'grpo_train',
        'framework': 'ms-swift',
        'framework_version': versions.get('ms-swift'),
        'model': f'{run.model} (random weights from its config.json)',
        'model_config': {k: run.model_config[k] for k in MEMORY_FIELDS if k in run.model_config},
        'argv': ['swift', 'rlhf', *run.argv],
        'config': config,
        'outcome': outcome,
        'gpu': gpu['name'],
        'num_gpus': 1,
        'gpu_total_gib': float(emulated) if emulated else gpu['total_gib'],
        'gpu_total_basis': ('torch.cuda.set_per_process_memory_fraction on ' + gpu['name']) if emulated else 'torch',
        'environ': {'PYTORCH_CUDA_ALLOC_CONF': run.env.get('PYTORCH_CUDA_ALLOC_CONF')},
        'env': ', '.join(f'{k} {v}' for k, v in versions.items() if v),
        'date': date,
        'source': 'bench/bench_swift_gpu.py',
        'data': f'GSM8K sample ({SAMPLE.name}) prepared by grpo-data',
        **({'prompt_tokens': prompt_tokens} if prompt_tokens else {}),
    }


def case_id(name: str, argv: list[str], emulated=None) -> str:
    """A launch's case id: its name, the emulated card, and its steps where not the default 2 (a longer run's peak
    is another measurement: a later, longer logits window adds segments)."""
    steps = argv[argv.index('--max_steps') + 1] if '--max_steps' in argv else '2'
    return (
        f'bench-swift-gpu-{name.replace("/", "-").replace("+", "-")}'
        + (f'-emul{emulated}g' if emulated else '')
        + (f'-steps{steps}' if steps != '2' else '')
    )


def run_one(run: Run, workdir: Path, timeout: float) -> dict:
    log = workdir / 'logs' / (run.name.replace('/', '__') + '.log')
    log.parent.mkdir(parents=True, exist_ok=True)
    peaks = log.with_suffix('.peaks.json')
    peaks.unlink(missing_ok=True)
    # the plugin appends one line per micro-batch (.windows) and per phase boundary (.phases): start empty
    lines = {part: Path(f'{peaks}.{part}') for part in ('windows', 'phases')}
    for file in lines.values():
        file.unlink(missing_ok=True)
    (workdir / 'peaks_plugin.py').write_text(PEAKS_PLUGIN)
    plugins = [str(workdir / 'peaks_plugin.py')]
    argv = list(run.argv)
    if '--external_plugins' in argv:  # the emulated card's plugin: one --external_plugins list holds both
        argv.insert(argv.index('--external_plugins') + 1, plugins.pop())
    argv += ['--external_plugins', *plugins] if plugins else []
    poller = PeakPoller()
    poller.start()
    t0 = time.time()
    with open(log, 'w') as f:
        try:
            rc = subprocess.run(
                [sys.executable, '-m', 'swift.cli.rlhf', *argv],
                stdout=f,
                stderr=subprocess.STDOUT,
                env={**os.environ, **run.env, 'GRPO_BENCH_PEAKS': str(peaks)},
                timeout=timeout,
            ).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    peak = poller.stop()
    try:
        torch_peaks = json.loads(peaks.read_text())
    except (OSError, ValueError):
        torch_peaks = {}
    # each micro-batch's logits window and the allocator's figures when it was collated (.windows); the allocator's
    # figures at each phase boundary of each step (.phases)
    recorded = {}
    for part, file in lines.items():
        try:
            recorded[part] = [json.loads(x) for x in file.read_text().splitlines() if x.strip()]
        except (OSError, ValueError):
            recorded[part] = []
    try:  # the allocator's counters and its segments when the reserve last grew (the plugin's .stats file)
        torch_stats = json.loads(Path(str(peaks) + '.stats').read_text())
    except (OSError, ValueError):
        torch_stats = {}
    return {
        **read_log(log.read_text(errors='replace')),
        'torch_peaks_gib': {k: round(v / 2**30, 2) for k, v in torch_peaks.items()},
        'torch_allocator': torch_stats,
        'logits_windows': recorded['windows'],
        'phases': recorded['phases'],
        'rc': rc,
        'nvml_peak_mib': peak,
        'seconds': round(time.time() - t0, 1),
        'log': str(log),
    }


def prepare_dataset(workdir: Path) -> Path:
    out = workdir / 'gsm8k.jsonl'
    if not out.exists():
        subprocess.run(
            [sys.executable, '-m', 'data_tools.cli', 'prepare-gsm8k', str(SAMPLE), '-o', str(out)], check=True, cwd=ROOT
        )
    return out


def dataset_prompt_tokens(dataset: Path, tokenizer: Path) -> dict | None:
    """The prepared data's shortest and longest prompt in tokens (``grpo-data stats --json``), for the case's
    ``prompt_tokens``: calibrate plans a run's prompt spread from it where the run recorded no windows."""
    out = subprocess.run(
        [sys.executable, '-m', 'data_tools.cli', 'stats', str(dataset), '--json', '--tokenizer', str(tokenizer)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    try:
        stats = json.loads(out.stdout)
    except ValueError:
        return None
    return {
        'min': stats['min'],
        'max': stats['max'],
        'source': f'grpo-data stats --json of the prepared GSM8K sample ({SAMPLE.name}), '
        + ('bundled Qwen2.5 tokenizer' if Path(tokenizer) == TOKENIZER else f'tokenizer {tokenizer}'),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--dry-run', action='store_true', help='print each launch (argv, environment, dropped settings)')
    p.add_argument('--only', nargs='*', help='recipes (or grid shapes) whose name contains one of these')
    p.add_argument('--grid', action='store_true', help="run the GRID shapes (no recipe's) instead of the recipes")
    p.add_argument('--alloc', default='default', help='allocators, comma-separated: default, expandable')
    p.add_argument('--emulate-gib', type=float, help='emulate a card of this many GiB (torch basis)')
    p.add_argument('--steps', type=int, default=2, help='optimizer steps per launch (default 2)')
    p.add_argument('--workdir', default='/tmp/grpo-bench-swift', help='models, data, logs')
    p.add_argument('--tokenizer', default=str(TOKENIZER))
    p.add_argument('--timeout', type=float, default=1800.0, help='seconds per launch')
    p.add_argument('--out', help='append the cases (JSON lines) to this file')
    p.add_argument('--build-model', nargs=3, metavar=('DIR', 'CONFIG_JSON', 'TOKENIZER'), help=argparse.SUPPRESS)
    opts = p.parse_args(argv)
    if opts.build_model:  # build_model's child process
        out, config, tok = opts.build_model
        _build_model_here(Path(out), json.loads(config), Path(tok))
        return 0
    allocs = tuple(a.strip() for a in opts.alloc.split(',') if a.strip())
    bad = [a for a in allocs if a not in ALLOCATORS]
    if bad:
        print(f'--alloc {",".join(bad)}: not one of {", ".join(ALLOCATORS)}', file=sys.stderr)
        return 2
    workdir = Path(opts.workdir)
    dataset = workdir / 'gsm8k.jsonl'
    if opts.grid:
        runs = grid_runs(workdir, dataset, opts.steps, opts.only)
    else:
        runs = recipe_runs(workdir, dataset, opts.steps, opts.only, allocs, opts.emulate_gib)
    if opts.dry_run:
        for r in runs:
            print(f'== {r.name}' + (f'   SKIPPED: {r.skip}' if r.skip else ''))
            print('env   ' + ' '.join(f'{k}={v}' for k, v in r.env.items()))
            print('argv  swift rlhf ' + ' '.join(r.argv))
            print('drop  ' + ', '.join(r.dropped))
        return 0
    import torch

    if not torch.cuda.is_available():
        print('no CUDA GPU here: run with --dry-run, or on a GPU machine', file=sys.stderr)
        return 2
    workdir.mkdir(parents=True, exist_ok=True)
    if opts.emulate_gib:
        (workdir / 'emulate_card.py').write_text(PLUGIN)
    prepare_dataset(workdir)
    prompt_tokens = dataset_prompt_tokens(dataset, Path(opts.tokenizer))
    props = torch.cuda.get_device_properties(0)
    gpu = {'name': props.name, 'total_gib': round(props.total_memory / 2**30, 2)}
    import importlib.metadata as md

    versions = {}
    for pkg in ('ms-swift', 'torch', 'transformers', 'peft', 'trl'):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    date = datetime.date.today().isoformat()
    for r in runs:
        if r.skip:
            print(f'{r.name:<55} skipped: {r.skip}', flush=True)
            continue
        build_model(workdir / 'models' / Path(r.model).name, r.model_config, Path(opts.tokenizer))
        res = run_one(r, workdir, opts.timeout)
        print(
            f'{r.name:<55} rc {res["rc"]:>3}  memory(GiB) {res["memory_gib"]}  NVML peak '
            f'{res["nvml_peak_mib"] / 1024:.2f} GiB  torch {res["torch_peaks_gib"]}  '
            f'{"OOM  " if res["oom"] else ""}{res["seconds"]} s  '
            f's/it {res["seconds_per_step"]}',
            flush=True,
        )
        if opts.out:
            with open(opts.out, 'a') as f:
                f.write(json.dumps(to_case(r, res, gpu, versions, date, prompt_tokens)) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
