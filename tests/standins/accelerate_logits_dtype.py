"""Print the dtype of a tiny bf16 model's logits after accelerate's `prepare`, under plain bf16 mixed precision
(`plain`) or DeepSpeed ZeRO-2 (`deepspeed`), on CPU. A real accelerate and a real DeepSpeed engine, not a stand-in for
either: it only stands in for a training script (tests/test_trace_long.py)."""

import sys

import torch
from accelerate import Accelerator
from accelerate.utils import DeepSpeedPlugin
from transformers import AutoConfig, AutoModelForCausalLM

mode = sys.argv[1]
if mode == 'deepspeed':
    # DeepSpeed's CPU accelerator JIT-compiles a shared-memory all-reduce kernel (deepspeed_shm_comm, 1-4 minutes
    # with ninja) when its process group starts: a speed-up of the collectives between processes on one machine, with
    # no part in the logits' dtype (one process here). Without it DeepSpeed uses torch.distributed's own collectives.
    import importlib

    # the module itself: the attribute `deepspeed.comm.torch` is the torch package deepspeed.comm imports
    importlib.import_module('deepspeed.comm.torch').build_shm_op = lambda: None
cfg = AutoConfig.for_model(
    'qwen2',
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=256,
)
model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
if mode == 'deepspeed':
    plugin = DeepSpeedPlugin(
        hf_ds_config={
            'train_micro_batch_size_per_gpu': 1,
            'gradient_accumulation_steps': 1,
            'bf16': {'enabled': True},
            'zero_optimization': {'stage': 2},
        }
    )
    acc = Accelerator(mixed_precision='bf16', deepspeed_plugin=plugin)
else:
    acc = Accelerator(mixed_precision='bf16', cpu=True)
model, opt = acc.prepare(model, opt)
print(model(input_ids=torch.randint(0, 256, (1, 8)).to(acc.device)).logits.dtype)
