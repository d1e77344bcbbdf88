"""Trace one GRPO training step of a launch on fake tensors and count the bytes it keeps alive (`grpo-guard trace`).

The model is the real Hugging Face class built from the launch's ``config.json`` (no weights: the meta device,
then ``to_empty`` under ``FakeTensorMode``), LoRA added with peft as the launch asks, gradient checkpointing on
when the launch has it. The step is what ms-swift 4.6's GRPO trainer runs on one training GPU for one
micro-batch: forward over prompt + completion tokens with logits kept for the completion only
(``logits_to_keep``), the mixed-precision wrapper's fp32 upcast of the logits (accelerate
``convert_outputs_to_fp32``), TRL's ``selective_log_softmax`` per row, the GRPO policy loss, backward, and the
optimizer transformers 5 picks by default (``adamw_torch_fused``), twice: the AdamW state exists only from the
first step on, so the second step is the steady-state peak. Before the step, the no-grad passes the framework
runs: the old policy's log-probabilities where it computes them (``plan.old_logprobs_needed``: ms-swift 4.6 always),
then the reference's when ``beta > 0`` (the adapter disabled under LoRA, a frozen copy for full training).

Counting: a ``TorchDispatchMode`` sees every aten op; each output's storage is counted once and released by a
weakref finalizer on the storage object, which PyTorch keeps alive as long as any tensor (autograd's saved
tensors included) holds it. Only CPU fake tensors are used (fake CUDA tensors abort on a CPU-only torch);
attention then dispatches to ``_scaled_dot_product_flash_attention_for_cpu``, which saves what
flash-attention 2 saves (q, k, v, output, fp32 logsumexp).

Not traced, and said so: quantised matmuls (GPTQ/AWQ/bnb kernels have no fake implementation here: the base
is traced at 16 bits and the report names the difference), DeepSpeed/FSDP (sharding is applied to the traced
per-parameter terms afterwards, with the accounting ``check`` uses), vLLM (its memory is not the trainer's).
Imports torch, transformers and peft: never on the fast ``check`` path.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field, fields

from ..plan import no_grad_passes
from .arch import Arch
from .inputs import Inputs
from .live_bytes import GiB, LiveBytes
from .trainer import trainer_terms


@dataclass
class TraceResult:
    model: str
    shape: str
    """micro-batch x tokens (prompt + completion) and the completion length."""
    traced_peak_gib: float
    """Allocated peak of the trainer on one training GPU, as traced (steady state: the second step)."""
    model_peak_gib: float | None
    """The analytic memory model's figure for the same quantity (trainer terms, no CUDA context/NCCL/vLLM)."""
    categories_gib: dict = field(default_factory=dict)
    """The traced peak split into parameters, gradients, optimizer state, activations and temporaries
    (``categorise``)."""
    peak_at: str = ''
    """The step stage and aten op at which the peak happened."""
    notes: list = field(default_factory=list)
    seconds: float = 0.0
    reserved_peak_gib: float | None = None
    """torch's reserved peak: the traced allocations and frees replayed through the caching-allocator model
    (``allocator.replay``) under ``allocator`` settings (what ms-swift logs as memory(GiB); no CUDA context)."""
    cached_after_step_gib: float | None = None
    """What the caching allocator still holds after the step frees its transients (reserved - allocated at the
    step's end, ``allocator.handover``): the next phase starts with it where no ``torch.cuda.empty_cache()`` runs
    between (``framework.Handover``; the fast path's ``reserve.carried``)."""
    allocator: str = ''
    """The PYTORCH_CUDA_ALLOC_CONF string the reserved figure was simulated with ('' for torch's defaults)."""
    no_grad_passes: list = field(default_factory=list)
    """The no-grad log-probability passes run before each step, in order (``"the old policy's"``,
    ``"the reference's"``)."""
    load: str = 'init'
    """How the weights came to the GPU (``trace_step``'s ``load``)."""
    events: list = field(default_factory=list, repr=False)
    """The step's allocations and frees (``LiveBytes.events``) and their stages, for ``trace --snapshot``; not in
    ``to_dict``."""
    event_stages: list = field(default_factory=list, repr=False)

    def to_dict(self) -> dict:
        import copy

        return {
            f.name: copy.deepcopy(getattr(self, f.name))
            for f in fields(self)
            if f.name not in ('events', 'event_stages')
        }


def _build_model(model_config: dict, dtype: str, cfg):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    mc = {k: v for k, v in model_config.items() if k not in ('quantization_config',)}
    hf_cfg = AutoConfig.for_model(mc.pop('model_type'), **mc)
    hf_cfg._attn_implementation = 'sdpa'
    with torch.device('meta'):
        try:
            model = AutoModelForCausalLM.from_config(hf_cfg, dtype=getattr(torch, dtype))
        except ValueError:
            # a multimodal model (Qwen2-VL, Qwen2.5-VL): its own class; the step is traced on text tokens
            import transformers

            arch = (model_config.get('architectures') or [''])[0]
            if not hasattr(transformers, arch):
                raise
            model = getattr(transformers, arch)._from_config(hf_cfg, dtype=getattr(torch, dtype))
    visual = [n for n, _ in model.named_modules() if n.split('.')[-1] == 'visual']
    if visual and cfg.freeze_vit:
        for n, prm in model.named_parameters():
            if '.visual.' in f'.{n}':
                prm.requires_grad_(False)  # ms-swift's freeze_vit (its default)
    if cfg.is_lora:
        from peft import LoraConfig, get_peft_model

        targets = cfg.target_modules
        if targets in (['all-linear'], 'all-linear', None):
            # ms-swift's all-linear on a multimodal model adapts the language model's linears only while the vision
            # tower is frozen (swift's multimodal target regex); PEFT's own all-linear would take the tower's too
            targets = (
                r'^(?!.*visual).*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)$'
                if visual
                else 'all-linear'
            )
        model = get_peft_model(
            model,
            LoraConfig(
                r=cfg.lora_rank,
                lora_alpha=int(cfg.lora_alpha),
                lora_dropout=cfg.lora_dropout,
                target_modules=targets,
                task_type='CAUSAL_LM',
            ),
        )
    return model


def _cuda_like_dropout(model) -> None:
    """Replace LoRA's dropout modules with one that keeps what CUDA's ``native_dropout`` keeps for backward: a
    bool mask (aten/src/ATen/native/cuda/Dropout.cu). The CPU decomposition keeps a float mask (4 bytes per
    element instead of 1), which would make the trace describe a CPU run rather than the GPU run it stands for."""
    import torch

    class _Drop(torch.autograd.Function):
        # one output each way, as the fused CUDA kernels allocate (native_dropout, native_dropout_backward): the
        # scale is applied in place
        @staticmethod
        def forward(ctx, x, p):
            keep = torch.rand_like(x) >= p
            ctx.save_for_backward(keep)
            ctx.scale = 1.0 / (1.0 - p)
            return x.mul(keep).mul_(ctx.scale)

        @staticmethod
        def backward(ctx, g):
            (keep,) = ctx.saved_tensors
            return g.mul(keep).mul_(ctx.scale), None

    class CudaLikeDropout(torch.nn.Module):
        def __init__(self, p):
            super().__init__()
            self.p = p

        def forward(self, x):
            return _Drop.apply(x, self.p) if self.training and self.p > 0 else x

    for module in model.modules():
        drops = getattr(module, 'lora_dropout', None)
        if isinstance(drops, torch.nn.ModuleDict):
            for k, d in list(drops.items()):
                if isinstance(d, torch.nn.Dropout):
                    drops[k] = CudaLikeDropout(d.p)


@contextlib.contextmanager
def _unpadded_masks():
    """The traced micro-batch has no padding (every row at prompt + completion). On real tensors transformers then
    builds no 4D mask and SDPA runs causal flash attention with ``enable_gqa`` (transformers masking_utils.py
    ``_ignore_causal_mask_sdpa``: ``fast_all(padding_mask)``; integrations/sdpa_attention.py ``use_gqa_in_sdpa``: no
    mask). On fake tensors that check reads the mask as "tracing" (import_utils.py ``is_tracing``:
    ``is_fake_tensor``) and builds a (bs, 1, T, T) mask and repeats K/V, which the GPU never does for this batch:
    answer it as real tensors without padding do (the sliding-window condition is kept)."""
    from unittest import mock

    from transformers import masking_utils

    original = masking_utils._ignore_causal_mask_sdpa

    def unpadded(padding_mask, *args, **kwargs):
        return original(None, *args, **kwargs)

    with mock.patch.object(masking_utils, '_ignore_causal_mask_sdpa', unpadded):
        yield


RELEASED = 'released after the step'


def build_error(e: Exception) -> str:
    """transformers' or PEFT's refusal to build the model, in one short clause: its first sentence (transformers lists
    every model type it knows after it)."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    first = text.split('. ')[0]
    return first if len(first) <= 160 else first[:157] + '...'


def _materialise(model) -> None:
    """Give each parameter and buffer built on the meta device its storage, in module order, a shared (tied) parameter
    once, as from_pretrained loads it. ``Module.to_empty`` would make the tied copy's storage as well and untie it."""
    import torch

    made: dict = {}
    for module in model.modules():
        for name, p in module._parameters.items():
            if p is not None and p.device.type == 'meta':
                if id(p) not in made:
                    made[id(p)] = torch.nn.Parameter(torch.empty_like(p, device='cpu'), requires_grad=p.requires_grad)
                module._parameters[name] = made[id(p)]
        for name, b in module._buffers.items():
            if b is not None and b.device.type == 'meta':
                module._buffers[name] = torch.empty_like(b, device='cpu')


def trace_step(
    cfg,
    model_config: dict,
    prompt_len: int,
    steps: int = 2,
    fake: bool = True,
    cuda_dropout: bool = True,
    sft: bool = False,
    adamw: str = 'fused',
    upcast_logits: bool = True,
    unpadded: bool = False,
    shapes: list[tuple[int, int]] | None = None,
    old_pass: bool = False,
    load: str = 'init',
) -> tuple[LiveBytes, dict, list[str]]:
    """Run ``steps`` GRPO optimizer steps of one micro-batch on fake tensors (``fake=False``: on real CPU tensors,
    for small models: the check that the fake run counts what a real run allocates); returns the counter, the
    storage keys by category, and notes.

    ``sft``: the loss is ms-swift's default SFT loss instead (swift/template/base.py ``compute_sft_loss``: the
    model's own forward with ``labels``, transformers ``ForCausalLMLoss``), over the last
    ``max_completion_length`` tokens (ms-swift ``prepare_logits_to_keep`` keeps logits from the first label on).
    ``adamw``: ``fused`` (``adamw_torch_fused``) or ``foreach`` (``adamw_torch``: torch's AdamW with neither flag
    runs the foreach implementation on CUDA, torch/optim/optimizer.py ``_default_to_fused_or_foreach``).
    ``upcast_logits``: accelerate's fp32 copy of the logits (bf16 mixed precision); False under DeepSpeed, where
    accelerate neither autocasts nor converts the outputs (see ``trace_launch``), so the logits stay 16-bit.
    ``unpadded``: attention as real tensors run it for a micro-batch without padding (``_unpadded_masks``: no 4D mask,
    GQA inside SDPA), the batch ``trace_launch`` plans; else as for a padded batch (the mask built, K/V repeated), which
    is also what fake tensors do on their own and what ms-swift's CPU steps in the parity tests run.
    ``shapes``: one (prompt, logits window) pair per step, in place of ``steps`` steps of (``prompt_len``,
    ``max_completion_length``): ms-swift's window is the completion plus the micro-batch's prompt spread
    (``memory.trainer.logits_rows``), so it changes from step to step, and the allocator keeps what each size left
    (``bench/bench_reserve_windows.py``). The prompt is the micro-batch's shortest, so prompt + window is its padded
    length.
    ``old_pass``: a no-grad forward for the old policy's log-probabilities first, before the reference pass, as
    ms-swift 4.6 runs for every micro-batch it prepares (``plan.old_logprobs_needed``). ``load``: how the weights come
    to the GPU, which decides the segments they sit in: ``init`` (``from_config`` on the device, as the harness grid of
    ``bench/bench_gpu_memory.py`` builds them: each module's weight in turn, a tied copy made and dropped),
    ``device_map`` (``from_pretrained`` with a device_map: one segment of the checkpoint's size first,
    ``plan.loads_with_device_map``) or ``moved`` (loaded on the CPU and moved: each weight once)."""
    import contextlib

    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    notes: list[str] = []
    dtype = (cfg.torch_dtype or model_config.get('torch_dtype') or 'bfloat16').replace('torch.', '')
    if dtype == 'auto':
        dtype = model_config.get('torch_dtype') or 'bfloat16'
    if model_config.get('quantization_config') or cfg.quant_method:
        notes.append(
            'quantised base traced at 16 bits (no fake kernel for the int4 matmul); the analytic model '
            'counts its packed int4 weights'
        )
        dtype = 'bfloat16'
    bs = cfg.per_device_train_batch_size
    C = cfg.max_completion_length
    T = prompt_len + C
    counter = LiveBytes()
    model = _build_model(model_config, dtype, cfg)
    with (
        FakeTensorMode(allow_non_fake_inputs=True) if fake else contextlib.nullcontext(),
        _unpadded_masks() if unpadded else contextlib.nullcontext(),
    ):
        with counter.mode:
            counter.stage = 'load'
            if load == 'device_map':
                # transformers' from_pretrained with a device_map first asks the caching allocator for one fp16 block
                # of the checkpoint's bytes, tied weights once, and frees it (modeling_utils.py
                # caching_allocator_warmup / get_total_byte_count): the weights are then carved out of that segment
                base = model.get_base_model() if hasattr(model, 'get_base_model') else model
                weights = sum(p.numel() * p.element_size() for n, p in base.named_parameters() if 'lora_' not in n)
                del base
                torch.empty(weights // 2, dtype=torch.float16)
            if load == 'init':
                # from_config on the device: every module makes its own weight, a tied one too, which tie_weights then
                # drops; to_empty does the same (it replaces each module's parameters one by one, untying a shared
                # embedding), and the tie is made again as transformers' PreTrainedModel.tie_weights makes it
                model = model.to_empty(device='cpu')
                (model.get_base_model() if hasattr(model, 'get_base_model') else model).tie_weights()
            else:
                _materialise(model)  # loaded: each weight once, a tied one too
            if not fake:
                for p in model.parameters():
                    p.data.normal_(0, 0.02)
            if cfg.is_lora:  # PEFT keeps adapters in fp32 (autocast_adapter_dtype)
                for n, p in model.named_parameters():
                    if 'lora_' in n:
                        p.data = p.data.float()
                if cuda_dropout:
                    _cuda_like_dropout(model)
            if cfg.gradient_checkpointing:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': False})
                if cfg.is_lora:
                    model.enable_input_require_grads()
            model.train()
            params = [p for p in model.parameters() if p.requires_grad]
            # transformers >= 4.54 with torch >= 2.8: adamw_torch_fused; else adamw_torch (foreach on CUDA)
            opt = torch.optim.AdamW(params, lr=1e-6, **({'fused': True} if adamw == 'fused' else {'foreach': True}))
            vocab = model_config['vocab_size']
            per_step = shapes or [(prompt_len, C)] * steps
            ids = mask = comp = None
            adv = torch.randn(bs)

            def batch(step):
                """The step's micro-batch, made again only when its shape changes."""
                nonlocal ids, mask, comp, C, T
                if step and per_step[step] == per_step[step - 1]:
                    return
                p, C = per_step[step]
                T = p + C
                ids = torch.randint(0, vocab, (bs, T))
                mask = torch.ones(bs, T, dtype=torch.long)
                comp = ids[:, p:]

            from trl.trainer.utils import selective_log_softmax  # what ms-swift's GRPO trainer imports

            def logps(m, grad: bool):
                # swift/rlhf_trainers/grpo_trainer.py _get_logps_via_local_forward
                with torch.set_grad_enabled(grad):
                    out = m(input_ids=ids, attention_mask=mask, logits_to_keep=C + 1, use_cache=False)
                    # accelerate convert_outputs_to_fp32 (bf16 mixed precision); under DeepSpeed the model's 16 bits
                    logits = out.logits.float() if upcast_logits else out.logits
                    del out
                    logits = logits[:, -(C + 1) : -1, :]
                    logits.div_(1.0)  # temperature, in place
                    return selective_log_softmax(logits, comp)

            def sft_loss(m, step):
                """ms-swift's SFT loss, and what the trainer still holds during backward (nothing)."""
                # swift compute_sft_loss -> model(**inputs) with labels (ForCausalLMLoss: fp32 upcast, cross
                # entropy); the mixed-precision wrapper then returns the logits in fp32 (convert_outputs_to_fp32),
                # and the outputs die with compute_loss, before backward
                counter.stage = f'step {step + 1} forward'
                keep = min(T, C + 1)
                labels = torch.full((bs, keep), -100, dtype=torch.long)
                labels[:, keep - C :] = comp
                out = m(input_ids=ids, attention_mask=mask, labels=labels, logits_to_keep=keep, use_cache=False)
                logits32 = out.logits.float()
                loss = out.loss
                del out, logits32
                return loss, ()

            def grpo_loss(m, step):
                """The GRPO loss (after a reference pass when beta > 0), and the log-probs the trainer still holds
                during backward."""
                ref = old = None
                if old_pass:
                    # swift/rlhf_trainers/grpo_trainer.py _prepare_batch_inputs: old_per_token_logps under no_grad,
                    # kept until the micro-batch's loss
                    counter.stage = f'step {step + 1} old log-probs pass'
                    old = logps(m, False)
                if cfg.beta:
                    counter.stage = f'step {step + 1} reference pass'
                    if cfg.is_lora:
                        with m.disable_adapter():
                            ref = logps(m, False)
                    else:
                        ref = logps(m, False)  # a frozen copy would add its weights: counted analytically
                counter.stage = f'step {step + 1} forward'
                lp = logps(m, True)
                ratio = torch.exp(lp - lp.detach())
                loss = -(ratio * adv.unsqueeze(1))
                held = (lp, ratio, ref, old)
                if ref is not None:
                    d = ref - lp
                    loss = loss + cfg.beta * (torch.exp(d) - d - 1)
                    held += (d,)
                return loss.mean(), held

            for step in range(len(per_step)):
                batch(step)
                counter.open_window()
                loss, held = (sft_loss if sft else grpo_loss)(model, step)
                counter.stage = f'step {step + 1} backward'
                loss.backward()
                del loss, held
                counter.close_window()
                counter.stage = f'step {step + 1} optimizer'
                opt.step()
                opt.zero_grad(set_to_none=(step + 1 < len(per_step)))  # the last step keeps its gradients (keys)
    keys = {
        'parameters': counter.keys_of(list(model.parameters()) + list(model.buffers())),
        'gradients': counter.keys_of([p.grad for p in params]),
        'optimizer state': counter.keys_of(
            [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
        ),
    }
    counter.stage = RELEASED  # what the caller frees from here on is no part of the step (trace --snapshot)
    return counter, keys, notes


CATEGORIES = ('parameters', 'gradients', 'optimizer state', 'activations', 'temporaries')


def categorise(counter: LiveBytes, keys: dict) -> dict:
    """The peak's live bytes per category: parameters, gradients and optimizer state by identity; the rest is an
    activation when a graph-building forward made it (saved for backward, or the logits it returned) and a
    temporary otherwise (backward's own buffers, no-grad passes, the optimizer step)."""
    out = {k: 0 for k in CATEGORIES}
    for key, (serial, n, with_grad) in counter.peak_live.items():
        cat = next((c for c, ks in keys.items() if (key, serial) in ks), 'activations' if with_grad else 'temporaries')
        out[cat] += n
    return {k: round(v / GiB, 3) for k, v in out.items()}


def analytic_peak(cfg, plan, arch, prompt_len: int, sft: bool = False, adamw: str = 'fused') -> float:
    """The memory model's trainer terms for one training GPU (what the trace measures): no CUDA context, NCCL
    buffers or vLLM, and without the allocator's fragmentation allowance (the trace counts allocated bytes)."""
    t = trainer_terms(
        cfg, plan, Inputs(arch=arch, capacity_gib=1e9, prompt_len=prompt_len, sft=sft, adamw=adamw), fragmentation=1.0
    )
    return (
        sum(
            v for k, v in t.items() if k not in ('cuda_context', 'nccl', 'zero3_sync_gather', 'zero3_generation_gather')
        )
        / GiB
    )


def step_as_run(cfg, plan, fw) -> tuple[bool, str]:
    """(``old_pass``, ``load``) for ``trace_step``: the step as ``fw`` (``Framework`` or its name) runs it, its
    no-grad pass for the old log-probabilities (``plan.old_logprobs_needed``) and how it loads the weights
    (``plan.loads_with_device_map``: ``device_map``, else ``moved``); None: the harness grid's step (no old pass,
    weights made on the GPU: ``init``)."""
    from ..plan import loads_with_device_map, old_logprobs_needed

    if fw is None:
        return False, 'init'
    load = 'device_map' if loads_with_device_map(cfg, plan, fw) else 'moved'
    return old_logprobs_needed(cfg, plan, fw), load


PER_PARAMETER_TERMS = ('weights', 'lora_params', 'grads+optimizer', 'zero3_live_params', 'ref_model')


def trace_launch(
    cfg,
    plan,
    model_config: dict,
    prompt_len: int,
    name: str,
    adamw: str = 'fused',
    adamw_why: str = '',
    alloc_conf=None,
    framework=None,
    window: int | None = None,
) -> TraceResult:
    """Trace the launch's step; ``adamw`` (``memory.resolve_adamw``) picks the optimizer implementation;
    ``alloc_conf``: the trainer's allocator (``allocconf.AllocConf``, or a PYTORCH_(CUDA_)ALLOC_CONF string), for the
    reserved figure; ``framework`` (``Framework`` or its name): the step as that trainer runs it (``step_as_run``);
    None: the harness grid's step; ``window``: the logits positions per sequence where they span more than the
    completion (``memory.trainer.logits_rows``: the micro-batch's padded length stays prompt + completion, its shortest
    prompt that less the window)."""
    t0 = time.time()
    old_pass, load = step_as_run(cfg, plan, framework)
    passes = no_grad_passes(cfg, plan, framework)
    sharded = bool(cfg.deepspeed or cfg.fsdp_sharding)
    # under DeepSpeed/FSDP the optimizer steps sharded state the single process cannot show: trace with the fused
    # step and take the optimizer's temporaries from the same accounting as the states
    # Under DeepSpeed accelerate leaves the forward alone: native_amp stays False for bf16 (accelerate 1.15
    # accelerator.py Accelerator.__init__, "self.distributed_type not in (DistributedType.DEEPSPEED, ...)"), so
    # prepare_model applies neither autocast nor convert_outputs_to_fp32, and ms-swift's
    # _get_logps_via_local_forward (and TRL's _get_per_token_logps_and_entropies) casts nothing: the logits reach
    # selective_log_softmax in 16 bits and take its row-wise log_softmax path (trl/trainer/utils.py)
    counter, keys, notes = trace_step(
        cfg,
        model_config,
        prompt_len,
        adamw='fused' if sharded else ('foreach' if adamw == 'foreach' else 'fused'),
        upcast_logits=not cfg.deepspeed,
        unpadded=True,
        old_pass=old_pass,
        load=load,
        shapes=None
        if window in (None, cfg.max_completion_length)
        else [(prompt_len + cfg.max_completion_length - window, window)] * 2,
    )
    if adamw_why:
        notes.append(f'optimizer: {adamw_why}')
    notes.append(
        'no-grad log-probability passes before each step: '
        + (' and '.join(passes) if passes else "none (beta 0, and the framework reuses the step's own)")
    )
    cats = categorise(counter, keys)
    traced = counter.peak / GiB
    arch = Arch.from_config(model_config)
    terms = trainer_terms(cfg, plan, Inputs(arch=arch, capacity_gib=1e9, prompt_len=prompt_len, adamw=adamw))
    per_param = sum(terms.get(k, 0.0) for k in PER_PARAMETER_TERMS) / GiB
    if sharded:
        # DeepSpeed keeps fp32 master weights, gradients and AdamW states partitioned over the processes, which a
        # single-process torch step cannot show: the per-parameter terms are DeepSpeed's/FSDP's accounting, the
        # same check uses (memory.trainer_terms), and the rest is traced; a foreach step's copy of the second
        # moments comes after backward, so the larger of it and the traced activations counts
        dynamic = cats['activations'] + cats['temporaries']
        foreach = terms.get('adamw_foreach_temp', 0.0) / GiB
        traced = max(dynamic, foreach) + per_param
        # the categories on the peak's basis: this process's shards, not the whole model the single process traced
        states = terms.get('grads+optimizer', 0.0) / GiB
        cats.update(
            {
                'parameters': round(per_param - states, 3),
                'gradients': 0.0,
                'optimizer state': round(states, 3),
                'temporaries': round(cats['temporaries'] + max(0.0, foreach - dynamic), 3),
            }
        )
        notes.append(
            'categories on the same basis as the peak: parameters, gradients and optimizer state are this '
            "process's shards (the gradients counted with the optimizer state, one term of DeepSpeed's/FSDP's "
            'accounting)'
        )
        notes.append(
            f'{cfg.deepspeed or "FSDP " + str(cfg.fsdp_sharding)}: parameters, gradients and optimizer '
            f"state from DeepSpeed's/FSDP's accounting ({per_param:.2f} GiB); activations traced"
        )
    elif model_config.get('quantization_config') or cfg.quant_method:
        # the base was traced at 16 bits: its parameters become the packed checkpoint's bytes (arch.weight_bytes: GPTQ
        # qweight eight 4-bit values per int32, fp16 scales and int32-packed zeros per group, 16-bit embeddings and
        # norms; bnb NF4 with its absmax) plus the fp32 adapters, in the category as in the total, so the categories
        # still add up to the peak. The int4 matmul dequantises one linear's weight to 16 bits before multiplying
        # (GPTQModel nn_modules/qlinear/torch.py TorchQuantLinear._forward: dequantize_weight().to(x.dtype), then
        # torch.matmul; bitsandbytes MatMul4Bit likewise): at most the largest linear at a time, a temporary.
        packed = (terms.get('weights', 0.0) + terms.get('lora_params', 0.0)) / GiB
        dequant = (
            2 * arch.hidden * max(arch.intermediate if not arch.experts else arch.moe_intermediate, arch.q_dim) / GiB
        )
        traced += packed - cats['parameters'] + dequant
        cats['parameters'] = round(packed, 3)
        cats['temporaries'] = round(cats['temporaries'] + dequant, 3)
        notes.append(
            f'quantised base: its traced 16-bit bytes replaced by the packed weights the analytic model '
            f'counts ({packed:.2f} GiB with the adapters), plus one linear dequantised to 16 bits '
            f'({dequant:.2f} GiB)'
        )
    elif not cfg.is_lora and cfg.beta:
        traced += terms.get('ref_model', 0.0) / GiB
        notes.append('full training with beta > 0: the frozen reference copy added from the analytic model')
    try:
        model_peak = round(analytic_peak(cfg, plan, arch, prompt_len, adamw=adamw), 3)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        model_peak = None
    from ..allocconf import AllocConf, conf_of
    from .allocator import handover, replay

    conf = alloc_conf if isinstance(alloc_conf, AllocConf) else conf_of(alloc_conf)
    # the same per-parameter corrections as the allocated figure (sharded or quantised terms) carry over unchanged
    reserved = replay(counter.events, conf).peak_reserved / GiB + traced - counter.peak / GiB
    cached, _ = handover([e for e, st in zip(counter.events, counter.event_stages) if st != RELEASED], [], conf)
    return TraceResult(
        cached_after_step_gib=round(cached / GiB, 3),
        reserved_peak_gib=round(reserved, 3),
        allocator=conf.text,
        model=name,
        shape=f'{cfg.per_device_train_batch_size} x {prompt_len + cfg.max_completion_length}'
        f' tokens (completion {cfg.max_completion_length})',
        traced_peak_gib=round(traced, 3),
        model_peak_gib=model_peak,
        categories_gib=cats,
        peak_at=counter.peak_at,
        notes=notes,
        no_grad_passes=passes,
        load=load,
        seconds=round(time.time() - t0, 2),
        events=counter.events,
        event_stages=counter.event_stages,
    )
