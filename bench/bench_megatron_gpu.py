"""Megatron-core memory measured on one GPU against the guard's Megatron terms (frontends/megatron/memory.py).

For each shape in SHAPES, in a fresh subprocess (one OOM or error does not stop the rest; ``--timeout`` each): a real
megatron-core ``GPTModel`` with the local (non-Transformer-Engine) layer spec, a ``TransformerConfig`` matching the HF
config (hidden, ffn, heads, GQA groups, RMSNorm, SwiGLU, rotary, qkv bias, tied or untied embeddings, the vocabulary
padded to a multiple of 128 x TP as Megatron-LM's ``_vocab_size_with_padding`` does), wrapped in megatron-core's
``DistributedDataParallel`` and ``get_megatron_optimizer`` (distributed optimizer, Adam, bf16), world 1, TP 1, PP 1;
then 3 training steps (forward with labels -> loss, backward, optimizer.step) on random tokens. Measured:
``torch.cuda.max_memory_allocated`` / ``max_memory_reserved`` after the build, after the optimizer is built, after the
first step (the static state: weights, fp32 grad buffer, fp32 main params + Adam moments), and over steps 2-3 (peak);
the device's used memory every 0.1 s (NVML, else nvidia-smi). Predicted: ``train_step_terms`` (the guard's terms for
exactly that shape). Printed per shape: static measured vs 2N + 4N + 12N/DP, activation peak (peak - static) vs
activations + logits, the totals with error %.

The local spec's attention (megatron/core/transformer/dot_product_attention.py) is unfused: it keeps the a x s x s
scores, so the prediction uses the guard's non-flash activations (``attention_backend='local'``).

    python bench/bench_megatron_gpu.py --dry-run          # shapes and predictions, no GPU
    python bench/bench_megatron_gpu.py --selftest-cpu     # tiny model, one step on CPU with gloo
    python bench/bench_megatron_gpu.py --out FILE.jsonl   # on the GPU: one JSON line per shape
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / 'bench'))
from bench_swift_gpu import MiB, PeakPoller  # noqa: E402 - the same NVML poller as the ms-swift bench

GiB = 2**30
STEPS = 3

# (model, micro_batch, seq, recompute): each well inside 80 GB with the local (unfused) attention
SHAPES = [
    ('Qwen/Qwen2.5-0.5B', 1, 4096, None),
    ('Qwen/Qwen2.5-0.5B', 1, 4096, 'full'),
    ('Qwen/Qwen2.5-0.5B', 4, 2048, None),
    ('Qwen/Qwen2.5-1.5B', 1, 2048, None),
    ('Qwen/Qwen2.5-1.5B', 8, 1024, 'full'),
]

TINY = {
    'hidden_size': 64,
    'intermediate_size': 128,
    'num_hidden_layers': 2,
    'num_attention_heads': 4,
    'num_key_value_heads': 2,
    'vocab_size': 1000,
    'tie_word_embeddings': False,
    'max_position_embeddings': 256,
    'rope_theta': 10000.0,
    'model_type': 'qwen2',
}


def shape_name(shape) -> str:
    model, mbs, seq, rec = shape
    return f'{model.split("/")[-1]} {mbs}x{seq} recompute={rec or "none"}'


def hf_config(model: str) -> dict:
    # the catalogue file read directly (grpo_recipes.models is the same file, but imports more than the GPU needs)
    cat = json.loads((ROOT / 'grpo_recipes' / 'model_configs' / 'catalogue.json').read_text())['models']
    if model not in cat:
        raise SystemExit(f'bench_megatron_gpu: {model} is not in the catalogue')
    return cat[model]['config']


def padded_vocab(vocab: int, tp: int = 1, divisible_by: int = 128) -> int:
    """Megatron-LM megatron/training/tokenizer/tokenizer.py ``_vocab_size_with_padding``: up to a multiple of
    ``make_vocab_size_divisible_by`` (128) x TP; ms-swift's Megatron arguments keep that default."""
    m = divisible_by * tp
    return -(-vocab // m) * m


def predict(cfg: dict, mbs: int, seq: int, recompute: str | None) -> dict:
    """The guard's terms for this shape (bytes), with the padded vocabulary Megatron builds."""
    from dataclasses import replace

    from grpo_recipes.frontends.megatron.memory import train_step_terms
    from grpo_recipes.memory.arch import Arch

    a = Arch.from_config(cfg)
    a = replace(a, vocab=padded_vocab(a.vocab))
    return train_step_terms(a, 1, 1, 1, mbs, seq, recompute, attention_backend='local')


# ---------------------------------------------------------------------------------------------------------------- child


def _no_triton_stub():
    """megatron-core 0.19.2 imports triton unconditionally in megatron/core/transformer/moe/ops/paged_stash.py
    (via gpt_model.py -> moe/paged_stash.py); a CUDA torch brings triton, a CPU one does not. For the CPU self-test
    only, that one module is replaced by its names (its kernels run only with MoE paged stashing)."""
    if importlib.util.find_spec('triton') is not None:
        return
    m = types.ModuleType('megatron.core.transformer.moe.ops.paged_stash')
    m.GLOBAL_BLOCK_SIZE = 1024
    m.paged_stash_copy_kernel = m.paged_stash_pop_kernel = None
    sys.modules[m.__name__] = m


def run_shape(cfg: dict, mbs: int, seq: int, recompute: str | None, cpu: bool) -> dict:
    """Build, wrap, 3 steps; the measured figures (bytes). ``cpu``: gloo, CPU initialisation, no CUDA figures."""
    import torch
    import torch.nn.functional as F

    if cpu:
        _no_triton_stub()
        # megatron-core's DDP allocates its parameter/gradient buffers on torch.cuda.current_device()
        # (megatron/core/distributed/param_and_grad_buffer.py ``_ParamAndGradBuffer.__init__``): on CPU, 'cpu'
        torch.cuda.current_device = lambda: 'cpu'
    os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
    os.environ.setdefault('MASTER_PORT', str(29500 + os.getpid() % 1000))
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group('gloo' if cpu else 'nccl', rank=0, world_size=1)
    if not cpu:
        torch.cuda.set_device(0)
    poller = None if cpu else PeakPoller()
    if poller:
        poller.start()
    from megatron.core import parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    from megatron.core.transformer import TransformerConfig

    parallel_state.initialize_model_parallel(1, 1)
    if not cpu:
        model_parallel_cuda_manual_seed(1234)
    else:
        # the attention's dropout region forks the CUDA RNG tracker (dot_product_attention.py ``forward``:
        # ``get_cuda_rng_tracker().fork()``), which has no CUDA state on CPU: dropout is 0, so no fork
        from contextlib import nullcontext

        from megatron.core.tensor_parallel.random import get_cuda_rng_tracker

        get_cuda_rng_tracker().fork = lambda *a, **k: nullcontext()
    full = recompute == 'full'
    tc = TransformerConfig(
        num_layers=cfg['num_hidden_layers'],
        hidden_size=cfg['hidden_size'],
        ffn_hidden_size=cfg['intermediate_size'],
        num_attention_heads=cfg['num_attention_heads'],
        num_query_groups=cfg.get('num_key_value_heads') or cfg['num_attention_heads'],
        kv_channels=cfg['hidden_size'] // cfg['num_attention_heads'],
        normalization='RMSNorm',
        layernorm_epsilon=cfg.get('rms_norm_eps', 1e-6),
        gated_linear_unit=True,
        activation_func=F.silu,
        add_bias_linear=False,
        add_qkv_bias=cfg.get('model_type') == 'qwen2',
        hidden_dropout=0.0,
        attention_dropout=0.0,
        bf16=True,
        params_dtype=torch.bfloat16,
        pipeline_dtype=torch.bfloat16,
        use_cpu_initialization=cpu,
        bias_activation_fusion=False,
        bias_dropout_fusion=False,
        masked_softmax_fusion=False,
        apply_rope_fusion=False,
        persist_layer_norm=False,
        gradient_accumulation_fusion=False,
        recompute_granularity='full' if full else None,
        recompute_method='uniform' if full else None,
        recompute_num_layers=1 if full else None,
    )
    vocab = padded_vocab(cfg['vocab_size'])
    tied = bool(cfg.get('tie_word_embeddings'))
    out: dict = {'padded_vocab': vocab}

    def mark(name):
        if cpu:
            return
        torch.cuda.synchronize()
        out[f'{name}_allocated'] = torch.cuda.memory_allocated()
        out[f'{name}_max_allocated'] = torch.cuda.max_memory_allocated()
        out[f'{name}_max_reserved'] = torch.cuda.max_memory_reserved()
        torch.cuda.reset_peak_memory_stats()

    model = GPTModel(
        config=tc,
        transformer_layer_spec=get_gpt_layer_local_spec(normalization='RMSNorm'),
        vocab_size=vocab,
        max_sequence_length=max(seq, cfg.get('max_position_embeddings') or seq),
        pre_process=True,
        post_process=True,
        share_embeddings_and_output_weights=tied,
        position_embedding_type='rope',
        rotary_base=int(cfg.get('rope_theta') or 10000),
    )
    if not cpu:
        model.cuda(torch.cuda.current_device())
    out['params'] = sum(p.numel() for p in model.parameters())
    ddp_cfg = DistributedDataParallelConfig(
        grad_reduce_in_fp32=True, overlap_grad_reduce=False, use_distributed_optimizer=True
    )
    model = DistributedDataParallel(config=tc, ddp_config=ddp_cfg, module=model)
    mark('build')
    opt_cfg = OptimizerConfig(
        optimizer='adam',
        lr=1e-5,
        weight_decay=0.0,
        bf16=True,
        params_dtype=torch.bfloat16,
        use_distributed_optimizer=True,
        clip_grad=1.0,
    )
    try:
        opt = get_megatron_optimizer(opt_cfg, [model])
    except (AssertionError, RuntimeError) as e:
        # megatron/core/optimizer/optimizer.py ``MixedPrecisionOptimizer.__init__``: ``torch.tensor([1.0], ...,
        # device='cuda')`` -- the optimizer needs CUDA; on CPU the self-test goes on without it
        if not cpu or 'CUDA' not in str(e):
            raise
        import traceback

        where = traceback.extract_tb(e.__traceback__)[-2]
        out['optimizer_needs_cuda'] = f'{Path(where.filename).name}:{where.lineno} {where.name}'
        opt = None
    mark('optimizer')
    dev = 'cpu' if cpu else torch.cuda.current_device()
    gen = torch.Generator(device='cpu').manual_seed(0)
    pos = torch.arange(seq, device=dev).unsqueeze(0).expand(mbs, seq)
    # None: the local softmax builds its causal mask itself, on 'cuda' (megatron/core/transformer/utils.py
    # ``get_default_causal_mask``); on CPU it is given (True = masked)
    mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)[None, None] if cpu else None
    losses = []
    for step in range(STEPS):
        tokens = torch.randint(0, cfg['vocab_size'], (mbs, seq + 1), generator=gen).to(dev)
        model.zero_grad_buffer()
        if opt is not None:
            opt.zero_grad()
        loss = model(tokens[:, :-1], pos, mask, labels=tokens[:, 1:]).float().mean()
        loss.backward()
        if not cpu:  # param_and_grad_buffer.py ``start_grad_sync``: torch.cuda.current_stream()
            model.finish_grad_sync()
        ok, grad_norm = True, None
        if opt is not None:
            ok, grad_norm, _ = opt.step()
        else:
            grad_norm = float(sum(b.grad_data.float().norm() ** 2 for b in model.buffers) ** 0.5)
        losses.append(round(float(loss), 4))
        if step == 0:
            del loss
            mark('step1')
    if not cpu:
        del loss
        mark('steps')
        out['static'] = out['step1_allocated']
        out['peak'] = out['steps_max_allocated']
        out['reserved_peak'] = max(out[k] for k in out if k.endswith('_max_reserved'))
        out['nvml_peak_mib'] = poller.stop()
    out['losses'] = losses
    out['step_ok'] = bool(ok)
    out['grad_norm'] = float(grad_norm) if grad_norm is not None else None
    torch.distributed.destroy_process_group()
    return out


def child(spec: str) -> None:
    d = json.loads(spec)
    t0 = time.time()
    meas = run_shape(d['cfg'], d['mbs'], d['seq'], d['recompute'], cpu=d.get('cpu', False))
    meas['seconds'] = round(time.time() - t0, 1)
    print('RESULT ' + json.dumps(meas), flush=True)


# --------------------------------------------------------------------------------------------------------------- parent


def compare(pred: dict, meas: dict) -> dict:
    """Measured vs predicted per term (GiB) and error % (measured - predicted) / measured."""
    p_static = pred['weights'] + pred['grads'] + pred['optimizer']
    p_act = pred['activations'] + pred['logits']
    rows = {
        'params': (meas.get('params'), pred['params']),
        'static_gib': (meas['static'] / GiB, p_static / GiB),
        'activation_peak_gib': ((meas['peak'] - meas['static']) / GiB, p_act / GiB),
        'allocated_peak_gib': (meas['peak'] / GiB, (p_static + p_act) / GiB),
        'reserved_peak_gib': (meas['reserved_peak'] / GiB, (p_static + p_act + pred['allocator_reserve']) / GiB),
        'device_peak_gib': (
            meas['nvml_peak_mib'] * MiB / GiB if meas.get('nvml_peak_mib', -1) > 0 else None,
            (p_static + p_act + pred['allocator_reserve'] + pred['cuda_context']) / GiB,
        ),
    }
    res = {}
    for k, (m, p) in rows.items():
        err = round(100 * (m - p) / m, 1) if m else None
        res[k] = {'measured': round(m, 3) if m is not None else None, 'predicted': round(p, 3), 'error_pct': err}
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--dry-run', action='store_true', help='shapes and the guard predictions, no GPU')
    ap.add_argument('--selftest-cpu', action='store_true', help='a tiny model, 3 steps on CPU with gloo')
    ap.add_argument('--out', type=Path, help='one JSON line per shape')
    ap.add_argument('--timeout', type=float, default=60.0, help='seconds per shape')
    ap.add_argument('--only', type=int, nargs='*', help='shape indices to run')
    ap.add_argument('--child', help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(a.child)
        return 0
    if a.selftest_cpu:
        spec = json.dumps({'cfg': TINY, 'mbs': 2, 'seq': 32, 'recompute': None, 'cpu': True})
        r = subprocess.run([sys.executable, __file__, '--child', spec], capture_output=True, text=True, timeout=300)
        line = next((x for x in r.stdout.splitlines() if x.startswith('RESULT ')), None)
        if r.returncode or not line:
            print(r.stdout[-3000:] + r.stderr[-3000:])
            print('bench_megatron_gpu: CPU self-test failed')
            return 1
        print('CPU self-test:', line[7:])
        return 0
    shapes = [s for i, s in enumerate(SHAPES) if a.only is None or i in a.only]
    header = f'{"shape":40} {"term":20} {"measured":>9} {"predicted":>9} {"err%":>6}'
    if a.dry_run:
        print(f'{"shape":40} {"N":>12} {"static GiB":>10} {"act GiB":>8} {"logits":>7} {"reserve":>7} {"total":>7}')
        for s in shapes:
            p = predict(hf_config(s[0]), s[1], s[2], s[3])
            static = p['weights'] + p['grads'] + p['optimizer']
            total = static + p['activations'] + p['logits'] + p['allocator_reserve'] + p['cuda_context']
            print(
                f'{shape_name(s):40} {int(p["params"]):>12} {static / GiB:>10.3f} {p["activations"] / GiB:>8.3f} '
                f'{p["logits"] / GiB:>7.3f} {p["allocator_reserve"] / GiB:>7.3f} {total / GiB:>7.3f}'
            )
        return 0
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text('')
    print(header, flush=True)
    for s in shapes:
        cfg = hf_config(s[0])
        rec = {'shape': shape_name(s), 'model': s[0], 'micro_batch': s[1], 'seq': s[2], 'recompute': s[3] or 'none'}
        try:
            pred = predict(cfg, s[1], s[2], s[3])
            rec['predicted_bytes'] = {k: int(v) for k, v in pred.items()}
        except ImportError as e:  # a guard dependency missing on the GPU machine: measure anyway
            pred, rec['predict_error'] = None, f'{type(e).__name__}: {e}'
        spec = json.dumps({'cfg': cfg, 'mbs': s[1], 'seq': s[2], 'recompute': s[3]})
        t0 = time.time()
        try:
            r = subprocess.run(
                [sys.executable, __file__, '--child', spec], capture_output=True, text=True, timeout=a.timeout
            )
            line = next((x for x in r.stdout.splitlines() if x.startswith('RESULT ')), None)
            if line:
                rec['measured'] = json.loads(line[7:])
                if pred is not None:
                    rec['compare'] = compare(pred, rec['measured'])
            else:
                tail = (r.stdout + r.stderr).strip().splitlines()[-3:]
                rec['error'] = ('OOM: ' if 'out of memory' in r.stderr else '') + ' | '.join(tail)[-1500:]
        except subprocess.TimeoutExpired:
            rec['error'] = f'timeout after {a.timeout:.0f} s'
        rec['wall_s'] = round(time.time() - t0, 1)
        if 'compare' in rec:
            for k, v in rec['compare'].items():
                fmt = '.0f' if k == 'params' else '.3f'
                m = '-' if v['measured'] is None else format(v['measured'], fmt)
                e = '-' if v['error_pct'] is None else f'{v["error_pct"]:.1f}'
                print(f'{rec["shape"]:40} {k:20} {m:>9} {format(v["predicted"], fmt):>9} {e:>6}', flush=True)
        elif 'measured' in rec:
            m = rec['measured']
            print(f'{rec["shape"]:40} measured only ({rec["predict_error"]}): ' + json.dumps(m), flush=True)
        else:
            print(f'{rec["shape"]:40} ERROR {rec["error"][:400]}', flush=True)
        if a.out:
            with a.out.open('a') as f:
                f.write(json.dumps(rec) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
