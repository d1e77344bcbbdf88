"""The vision tower in the trainer's step (Qwen2-VL / Qwen2.5-VL under ms-swift 4.6).

- Weights: counted in ``Arch.vision`` (arch.py ``vision_params``) and kept whole on every rank that holds the model.
- Training: ms-swift freezes the tower by default (``freeze_vit: bool = True``, swift/arguments/tuner_args.py; its
  ``_init_freeze`` adds the model's ``vision_tower`` to the frozen parameters for full training, and LoRA's
  ``all-linear`` leaves the tower out). A frozen tower fed pixels that need no gradient saves nothing for backward:
  its cost is the forward's live tensors, freed before the language model's own peak. A trained tower
  (``--freeze_vit false``) keeps, per patch and block, what a decoder layer of the same structure keeps (Qwen2.5-VL's
  block is RMSNorm, attention and a SwiGLU MLP, transformers modeling_qwen2_5_vl.py ``Qwen2_5_VLVisionBlock``):
  24e + 4e + 8i bytes in 16 bits (memory.trainer_terms' per-layer count with kv = e), or with gradient checkpointing
  its 2e input per block plus one block recomputed.
- Sequence length: each image is ``tokens_per_image`` LLM tokens inside the prompt (ms-swift's ``max_length`` counts
  them); the image bound is the ``MAX_PIXELS`` environment variable ms-swift's Qwen2-VL templates read, else the
  processor's ``max_pixels``.
"""

from __future__ import annotations

from . import vllm_startup as vs
from .arch import Arch


def tokens_per_image(model_type: str, max_pixels: int | None = None) -> int:
    """LLM tokens of one image at the bound (MAX_PIXELS or the processor's max_pixels); 0 for other models."""
    facts = vs.vision_facts(model_type)
    if not facts:
        return 0
    pp = dict(facts['preprocessor'])
    if max_pixels:
        pp['max_pixels'] = int(max_pixels)
    return vs.tokens_for(pp, 1)


def vision_activation_bytes(
    a: Arch, freeze_vit: bool, images: int, max_pixels: int | None, rows: int, checkpointed: bool
) -> float:
    """Bytes the vision tower adds to a micro-batch of ``rows`` sequences with ``images`` images each (0 without
    images or for a text model). Frozen: the largest block's live tensors during the forward (the same count as vLLM's
    encoder pass, ``vllm_startup.encoder_peak_per_patch``, at TP 1). Trained: the saved tensors above."""
    facts = vs.vision_facts(a.model_type)
    if not facts or not images or not rows:
        return 0.0
    v = facts['vision']
    patches = rows * images * tokens_per_image(a.model_type, max_pixels) * facts['preprocessor']['merge_size'] ** 2
    if freeze_vit:
        return patches * vs.encoder_peak_per_patch(a.model_type, v, 1, a.dtype_bytes)
    e = v.get('hidden_size') or v['embed_dim']
    i = v.get('intermediate_size') or e * v.get('mlp_ratio', 4)
    per_block = 24 * e + 4 * e + 8 * i
    if checkpointed:
        return patches * (2 * e * v['depth'] + per_block)
    return patches * per_block * v['depth']
