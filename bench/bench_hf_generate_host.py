"""Host-side (CPU) costs of HF generate as ms-swift runs it with ``use_vllm false``, timed here with the real code:

1. ms-swift's ``StopWordsCriteria`` (swift/template/utils.py, ms-swift 4.6) with the Qwen2.5 tokenizer and the
   qwen2_5 template's stop words: seconds per call by batch size (it batch-decodes each sequence's last 20 tokens and
   loops over the sequences in Python every decode step), and the device round trips per sequence it would make on a
   GPU (``aten::_local_scalar_dense``: a device-to-host copy and a sync; ``aten::fill_``: one kernel), counted with
   torch's profiler.
2. transformers' ``generate`` loop on a tiny random Qwen2 (hidden 64, vocab 1,024: the arithmetic is negligible, so
   what is left is Python, the dispatcher and the loop's bookkeeping): seconds per decode step by layer count and batch
   size, with and without an unmerged PEFT LoRA (r 16, all linear layers), and aten ops per layer per step (each a
   kernel launch on a GPU).

Prints figures only; nothing here sets a constant by itself (docs/throughput.md says which figures the speed model
uses). Run: ``python bench/bench_hf_generate_host.py [--json]`` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER = ROOT / 'data_tools' / 'tokenizer'


def _best(fn, repeat: int, inner: int) -> float:
    """Fastest of `repeat` timings of `inner` calls, per call (the host's own cost, least disturbed by other work)."""
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        out.append((time.perf_counter() - t) / inner)
    return min(out)


# ops that only make a view (no kernel on a GPU)
_VIEWS = {
    'view',
    '_unsafe_view',
    'reshape',
    'alias',
    'as_strided',
    'detach',
    'expand',
    'permute',
    'select',
    'slice',
    't',
    'transpose',
    'unsqueeze',
    'squeeze',
    'split',
    'unbind',
    'lift_fresh',
    'split_with_sizes',
    'chunk',
    'narrow',
    'sym_size',
    'sym_stride',
    'is_same_size',
}


def dispatched(fn) -> dict:
    """aten ops fn() dispatches, by name, views excluded: each is a kernel (or a copy) on a GPU."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops: dict = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            if name not in _VIEWS:
                self.ops[name] = self.ops.get(name, 0) + 1
            return func(*args, **(kwargs or {}))

    with Count() as c:
        fn()
    return c.ops


def stop_words() -> dict:
    from swift.template import TEMPLATE_MAPPING
    from swift.template.utils import StopWordsCriteria
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(TOKENIZER))
    meta = TEMPLATE_MAPPING['qwen2_5']
    # what TemplateMeta.init adds: the suffix's stop token and the tokenizer's eos
    words = list(meta.stop_words)
    for w in (meta.suffix[-1].strip() if isinstance(meta.suffix[-1], str) else None, tok.eos_token):
        if w and w not in words:
            words.append(w)
    g = torch.Generator().manual_seed(0)
    rows = {}
    for batch in (1, 8, 16, 32):
        ids = torch.randint(0, 151000, (batch, 168 + 512), generator=g)
        crit = StopWordsCriteria(tok, words)
        crit(ids[:, :168], None)  # first call fixes start_idx, as generate's first step does
        sec = _best(lambda: crit(ids, None), repeat=5, inner=20)
        ops = dispatched(lambda: crit(ids, None))
        rows[batch] = {'seconds_per_call': sec, 'ops': ops}
    b = sorted(rows)
    slope = statistics.linear_regression(b, [rows[x]['seconds_per_call'] for x in b])
    return {
        'stop_words': words,
        'by_batch': rows,
        'per_sequence_s': slope.slope,
        'fixed_s': slope.intercept,
        # .item() of is_done[i]: a device-to-host copy and a sync; is_done[i] = bool: a host-to-device copy
        'syncs_per_sequence': rows[16]['ops'].get('_local_scalar_dense', 0) / 16,
        'copies_per_sequence': rows[16]['ops'].get('copy_', 0) / 16,
    }


def _tiny(layers: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1024,
        max_position_embeddings=2048,
    )
    return Qwen2ForCausalLM(cfg).eval()


def _generate_step(model, batch: int, new: int, lora: bool) -> tuple[float, dict]:
    from transformers import GenerationConfig

    prompt = torch.randint(3, 1000, (batch, 64))
    mask = torch.ones_like(prompt)
    mask[: batch // 2, :8] = 0  # left padding, as ms-swift batches prompts of different lengths
    gc = GenerationConfig(
        max_new_tokens=new,
        min_new_tokens=new,
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        pad_token_id=0,
        eos_token_id=1,
    )

    def run(n):
        gc.max_new_tokens = gc.min_new_tokens = n
        with torch.no_grad():
            model.generate(input_ids=prompt, attention_mask=mask, generation_config=gc)

    # seconds per decode step: (n steps - 1 step) / (n - 1), so the prefill and set-up cancel
    long = _best(lambda: run(new), repeat=5, inner=1)
    short = _best(lambda: run(1), repeat=5, inner=1)
    per_step = (long - short) / (new - 1)
    ops_long = sum(dispatched(lambda: run(9)).values())
    ops_short = sum(dispatched(lambda: run(1)).values())
    return per_step, {'kernels_per_step': (ops_long - ops_short) / 8}


def generate_loop() -> dict:
    from peft import LoraConfig, get_peft_model

    out = {}
    for lora in (False, True):
        for layers in (1, 8):
            for batch in (1, 16):
                model = _tiny(layers)
                if lora:
                    cfgl = LoraConfig(
                        r=16,
                        lora_alpha=32,
                        lora_dropout=0.05,
                        target_modules=['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
                    )
                    model = get_peft_model(model, cfgl).eval()
                sec, ops = _generate_step(model, batch, 64, lora)
                out[f'{"lora" if lora else "base"} L{layers} B{batch}'] = {'seconds_per_step': sec, **ops}
    res = {'runs': out}
    for kind in ('base', 'lora'):
        for batch in (1, 16):
            a, b = out[f'{kind} L1 B{batch}'], out[f'{kind} L8 B{batch}']
            res[f'{kind} B{batch}: per layer s'] = (b['seconds_per_step'] - a['seconds_per_step']) / 7
            res[f'{kind} B{batch}: fixed s'] = a['seconds_per_step'] - res[f'{kind} B{batch}: per layer s']
            res[f'{kind} B{batch}: kernels per layer'] = (b['kernels_per_step'] - a['kernels_per_step']) / 7
            res[f'{kind} B{batch}: kernels outside the layers'] = (
                a['kernels_per_step'] - res[f'{kind} B{batch}: kernels per layer']
            )
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--json', action='store_true')
    opts = p.parse_args(argv)
    torch.set_num_threads(1)
    sw = stop_words()
    gl = generate_loop()
    host = f'{platform.processor() or platform.machine()}, torch {torch.__version__}, 1 thread'
    if opts.json:
        print(json.dumps({'host': host, 'stop_words': sw, 'generate_loop': gl}, indent=2, default=str))
        return 0
    print(f'host: {host}')
    print(f'ms-swift StopWordsCriteria, stop words {sw["stop_words"]}:')
    for b, r in sw['by_batch'].items():
        print(f'  batch {b:>2}: {r["seconds_per_call"] * 1e6:8.1f} us per decode step; ops {sum(r["ops"].values())}')
    print(
        f'  fit: {sw["fixed_s"] * 1e6:.1f} us + {sw["per_sequence_s"] * 1e6:.1f} us per sequence per step; on a GPU '
        f'also {sw["syncs_per_sequence"]:.0f} device-to-host sync(s) and {sw["copies_per_sequence"]:.0f} '
        'host-to-device copy(ies) per sequence per step'
    )
    print('transformers generate loop, tiny random Qwen2 (hidden 64, vocab 1,024), left-padded, sampling:')
    for k, r in gl['runs'].items():
        print(f'  {k:14}: {r["seconds_per_step"] * 1e3:7.3f} ms per decode step, {r["kernels_per_step"]:.0f} kernels')
    for k, v in gl.items():
        if k != 'runs':
            print(f'  {k}: {v * 1e3:.3f} ms' if k.endswith(' s') else f'  {k}: {v:.0f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
