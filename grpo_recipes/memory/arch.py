"""Model architecture from a ``config.json``: exact parameter counts and weight bytes.

Decoder-only families: Qwen2/2.5 (q/k/v bias), Qwen3 (q/k norm), Llama, Mistral (GQA via
``num_key_value_heads``, optional ``head_dim``), tied embeddings, and MoE (Qwen2-MoE / Qwen3-MoE
experts, router and shared expert; Mixtral). tests/test_memory.py checks the counts against
transformers' own meta-device instantiation.

Quantised checkpoints (peers-and-memory.md §E.4):
- GPTQ/AWQ: each quantised linear weight costs ``bits/8`` bytes plus, per group of ``group_size``
  input features and per output, an fp16 scale and a packed zero point (``bits/8`` bytes):
  ``bits/8 + (2 + bits/8)/group_size`` bytes per weight (0.5195 at 4 bits, g=128). Embeddings,
  ``lm_head``, norms and biases stay 16-bit.
- bnb NF4 with double quantisation: 4.127 bits per weight (QLoRA paper §3), 4.5 without.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


def model_max_len(model: dict | None) -> int | None:
    """The model's context as vLLM derives it: ``max_position_embeddings``, times the RoPE factor for YaRN/dynamic
    scaling (vllm/config/model.py ``_get_and_verify_max_len``); None when config.json does not say."""
    if not model:
        return None
    mpe = model.get('max_position_embeddings')
    if not isinstance(mpe, int):
        return None
    rope = model.get('rope_scaling') or {}
    factor = rope.get('factor') if isinstance(rope, dict) else None
    if (
        isinstance(factor, (int, float))
        and factor > 1
        and rope.get('type', rope.get('rope_type')) in ('yarn', 'dynamic')
    ):
        return int(mpe * factor)
    return mpe


def _attention_layers(cfg: dict) -> int | None:
    """Layers with a per-token KV cache in a hybrid model: those of ``layer_types`` that are not
    ``linear_attention`` (transformers' Qwen3-Next / Qwen3.5 configs), else every ``full_attention_interval``-th
    layer; None for a model with attention in every layer."""
    types = cfg.get('layer_types')
    if isinstance(types, list) and 'linear_attention' in types:
        return sum(1 for t in types if t != 'linear_attention')
    every = cfg.get('full_attention_interval')
    if isinstance(every, int) and every > 1 and 'layer_types' not in cfg:
        return int(cfg['num_hidden_layers']) // every
    return None


# The names a dtype goes by (vLLM's --dtype half, ms-swift's bf16, a case's fp32) -> torch's name for it.
DTYPE_ALIASES = {'bf16': 'bfloat16', 'fp16': 'float16', 'half': 'float16', 'fp32': 'float32', 'float': 'float32'}


@dataclass(frozen=True)
class Arch:
    model_type: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    dtype: str
    max_position_embeddings: int | None
    attention_bias: bool
    qk_norm: bool
    experts: int = 0
    experts_per_token: int = 0
    moe_intermediate: int = 0
    shared_expert_intermediate: int = 0
    quant: dict = field(default_factory=dict)
    vision: int = 0
    """Parameters of the vision tower and its merger (Qwen2-VL / Qwen2.5-VL ``vision_config``; see
    ``vision_params``), kept at 16 bits and frozen by ms-swift's default ``freeze_vit``."""
    attention_layers: int | None = None
    """Hybrid models (Qwen3-Next, Qwen3.5: ``layer_types`` with ``linear_attention``): the layers that keep a KV
    cache per token; the linear-attention layers keep a fixed state per sequence instead. None: every layer."""
    linear_attention: tuple[int, int, int, int, int] = ()
    """Hybrid models: the linear-attention (Gated DeltaNet) shape, (key heads, key head dim, value heads, value head
    dim, conv kernel) from ``linear_num_key_heads`` etc."""
    gated_q: bool = False
    """Qwen3-Next / Qwen3.5 attention: q_proj also projects an output gate (2 x heads x head_dim outputs)."""
    rotary_fraction: float = 1.0
    """``partial_rotary_factor``: the share of head_dim that RoPE rotates (vLLM's rotary_dim; Qwen3-Next 0.25)."""
    rope_context: int | None = None
    """The context with RoPE scaling as vLLM derives it (:func:`model_max_len`); None: not in config.json."""

    @classmethod
    def from_config(cls, cfg: dict) -> 'Arch':
        audio = 0
        if isinstance(cfg.get('thinker_config'), dict) and 'hidden_size' not in cfg:
            # Qwen2.5-Omni: the thinker (text model, vision and audio towers) is what ms-swift trains and generates
            # with; the talker and token2wav (speech output) are not counted
            thinker = cfg['thinker_config']
            audio = audio_params(thinker.get('audio_config'))
            cfg = {**thinker, 'model_type': cfg.get('model_type') or thinker.get('model_type', '')}
            for key in ('torch_dtype', 'dtype', 'tie_word_embeddings'):
                if key not in cfg and key in thinker.get('text_config', {}):
                    cfg[key] = thinker['text_config'][key]
        cfg = (
            dict(cfg.get('text_config') or {}, **{k: v for k, v in cfg.items() if k != 'text_config'})
            if 'text_config' in cfg and 'hidden_size' not in cfg
            else cfg
        )
        mt = str(cfg.get('model_type', '')).lower()
        heads = int(cfg['num_attention_heads'])
        hidden = int(cfg['hidden_size'])
        head_dim = cfg.get('head_dim') or hidden // heads
        experts = int(cfg.get('num_experts') or cfg.get('num_local_experts') or 0)
        quant = dict(cfg.get('quantization_config') or {})
        bias = cfg.get('attention_bias')
        if bias is None:
            bias = mt in ('qwen2', 'qwen2_moe', 'qwen2_vl', 'qwen2_5_vl', 'qwen2_5_omni')
        return cls(
            model_type=mt,
            hidden=hidden,
            layers=int(cfg['num_hidden_layers']),
            heads=heads,
            kv_heads=int(cfg.get('num_key_value_heads') or heads),
            head_dim=int(head_dim),
            intermediate=int(cfg.get('intermediate_size') or 0),
            vocab=int(cfg['vocab_size']),
            tied=bool(cfg.get('tie_word_embeddings', False)),
            dtype=str(cfg.get('torch_dtype') or cfg.get('dtype') or 'bfloat16'),
            max_position_embeddings=cfg.get('max_position_embeddings'),
            rope_context=model_max_len(cfg),
            attention_bias=bool(bias),
            qk_norm=mt.startswith('qwen3'),
            experts=experts,
            experts_per_token=int(cfg.get('num_experts_per_tok') or 0),
            # an expert's width: moe_intermediate_size where the config has one (Qwen2/3-MoE, DeepSeek), else
            # intermediate_size is the experts' own (transformers MixtralConfig, GptOssConfig, OlmoeConfig,
            # PhimoeConfig, GraniteMoeConfig: "dimension of the MLP representations" of each expert)
            moe_intermediate=int(
                cfg.get('moe_intermediate_size') or (cfg.get('intermediate_size') if experts else 0) or 0
            ),
            shared_expert_intermediate=int(cfg.get('shared_expert_intermediate_size') or 0),
            quant=quant,
            vision=vision_params(TOWER_FAMILY.get(mt, mt), cfg.get('vision_config'), hidden) + audio,
            attention_layers=_attention_layers(cfg),
            linear_attention=(
                int(cfg.get('linear_num_key_heads') or 0),
                int(cfg.get('linear_key_head_dim') or 0),
                int(cfg.get('linear_num_value_heads') or 0),
                int(cfg.get('linear_value_head_dim') or 0),
                int(cfg.get('linear_conv_kernel_dim') or 4),
            )
            if _attention_layers(cfg)
            else (),
            gated_q=mt.startswith(('qwen3_next', 'qwen3_5')),
            rotary_fraction=float(cfg.get('partial_rotary_factor') or 1.0),
        )

    # ---- parameter counts ----
    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def context_len(self) -> int:
        """The model's context, as vLLM and the length rules take it: ``max_position_embeddings`` times a YaRN/dynamic
        RoPE factor (:func:`model_max_len`, the one owner), or 32768 (Qwen2.5's) when the config leaves it out."""
        return self.rope_context or self.max_position_embeddings or 32768

    @property
    def token_mlp_width(self) -> int:
        """SwiGLU width one token passes through: the dense MLP, or its routed experts plus any shared one."""
        if self.experts:
            return self.moe_intermediate * max(1, self.experts_per_token) + self.shared_expert_intermediate
        return self.intermediate

    def attention_linear_params(self) -> int:
        h = self.hidden
        return h * self.q_dim * (2 if self.gated_q else 1) + 2 * h * self.kv_dim + self.q_dim * h

    @property
    def linear_layers(self) -> int:
        """Hybrid models: the linear-attention layers (0 otherwise)."""
        return 0 if self.attention_layers is None else self.layers - self.attention_layers

    def linear_attention_params(self) -> tuple[int, int]:
        """(matrices, small) of one Gated DeltaNet layer (transformers' Qwen3-Next / Qwen3.5 linear_attn: q, k, v,
        z, b, a projections in, out_proj back; a depthwise conv over q, k, v; a per-head-dim norm; dt_bias and
        A_log per value head)."""
        kh, kd, vh, vd, kernel = self.linear_attention
        h, key, value = self.hidden, kh * kd, vh * vd
        return h * (2 * key + 2 * value) + 2 * h * vh + value * h, (2 * key + value) * kernel + vd + 2 * vh

    def mlp_linear_params(self) -> int:
        h = self.hidden
        if self.experts:
            p = self.experts * 3 * h * self.moe_intermediate
            if self.shared_expert_intermediate:
                p += 3 * h * self.shared_expert_intermediate
            return p
        return 3 * h * self.intermediate

    def layer_small_params(self) -> int:
        """Norms, biases, routers: parameters that stay 16-bit in quantised checkpoints."""
        h = self.hidden
        p = 2 * h
        if self.attention_bias:
            p += self.q_dim + 2 * self.kv_dim
        if self.qk_norm:
            p += 2 * self.head_dim
        if self.experts:
            p += h * self.experts  # router
            if self.shared_expert_intermediate:
                p += h  # shared expert gate
        return p

    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied else 2)

    def linear_params(self) -> int:
        if self.linear_layers:
            return (
                (self.layers - self.linear_layers) * self.attention_linear_params()
                + self.layers * self.mlp_linear_params()
                + self.linear_layers * self.linear_attention_params()[0]
            )
        return self.layers * (self.attention_linear_params() + self.mlp_linear_params())

    def small_params(self) -> int:
        """Norms, biases, routers, convs over all layers (16-bit in quantised checkpoints)."""
        if self.linear_layers:
            no_qk = self.layer_small_params() - (2 * self.head_dim if self.qk_norm else 0)
            return (self.layers - self.linear_layers) * self.layer_small_params() + self.linear_layers * (
                no_qk + self.linear_attention_params()[1]
            )
        return self.layers * self.layer_small_params()

    def param_count(self) -> int:
        return self.linear_params() + self.small_params() + self.embedding_params() + self.hidden + self.vision

    def largest_layer_params(self) -> int:
        """The biggest single module ZeRO-3 gathers at once (embedding or one decoder layer)."""
        return max(self.vocab * self.hidden, self.attention_linear_params() + self.mlp_linear_params())

    def active_params(self) -> int:
        if not self.experts:
            return self.param_count()
        per_expert = 3 * self.hidden * self.moe_intermediate
        return self.param_count() - self.layers * per_expert * (self.experts - max(1, self.experts_per_token))

    # ---- bytes ----
    @property
    def dtype_bytes(self) -> int:
        return 4 if 'float32' in self.dtype else 2

    def quant_method(self) -> str | None:
        m = self.quant.get('quant_method')
        return str(m).lower() if m else None

    def bnb_bits(self) -> int | None:
        """A bitsandbytes checkpoint (``quantization_config.quant_method 'bitsandbytes'``: the ``-bnb-4bit`` uploads):
        transformers and vLLM load it at its own bits (8 with ``load_in_8bit``, else 4) whatever the launch says;
        None for any other checkpoint."""
        if self.quant_method() != 'bitsandbytes':
            return None
        return 8 if (self.quant.get('load_in_8bit') or self.quant.get('_load_in_8bit')) else 4

    def linear_modules(self, fused: bool = False) -> list[tuple[str, int]]:
        """(module name, parameters) of every decoder linear layer, under transformers' names
        (``model.layers.N.self_attn.q_proj``, ``.mlp.down_proj``; MoE experts as one ``mlp.experts`` module, as
        transformers 5 and vLLM's FusedMoE hold them), or vLLM's fused ones (``qkv_proj``, ``gate_up_proj``). A hybrid
        model's layers are named by kind in the order of ``layer_types`` only roughly: each layer is one
        ``model.layers.N`` entry there."""
        h, q, kv = self.hidden, self.q_dim * (2 if self.gated_q else 1), self.kv_dim
        if fused:
            attn = [('self_attn.qkv_proj', h * (q + 2 * kv)), ('self_attn.o_proj', self.q_dim * h)]
        else:
            attn = [('self_attn.q_proj', h * q), ('self_attn.k_proj', h * kv), ('self_attn.v_proj', h * kv),
                    ('self_attn.o_proj', self.q_dim * h)]  # fmt: skip
        if self.experts:
            mlp = [('mlp.experts', self.experts * 3 * h * self.moe_intermediate)]
            if self.shared_expert_intermediate:
                w = self.shared_expert_intermediate
                mlp += (
                    [('mlp.shared_expert.gate_up_proj', 2 * h * w), ('mlp.shared_expert.down_proj', w * h)]
                    if fused
                    else [(f'mlp.shared_expert.{n}', h * w) for n in ('gate_proj', 'up_proj', 'down_proj')]
                )
        elif fused:
            mlp = [('mlp.gate_up_proj', 2 * h * self.intermediate), ('mlp.down_proj', self.intermediate * h)]
        else:
            mlp = [(f'mlp.{n}', h * self.intermediate) for n in ('gate_proj', 'up_proj', 'down_proj')]
        if self.linear_layers:
            per_layer = self.linear_params() // self.layers
            return [(f'model.layers.{i}', per_layer) for i in range(self.layers)]
        return [(f'model.layers.{i}.{n}', p) for i in range(self.layers) for n, p in attn + mlp]

    def skipped_linear_params(self, rule: str = 'transformers') -> int:
        """Linear parameters a bitsandbytes checkpoint keeps at 16 bits (``llm_int8_skip_modules``; unsloth's dynamic
        4-bit uploads list whole layers there), matched as the loader matches them: ``transformers``
        (quantizers_utils.py ``should_convert_module``, 5.19: the key as a regex at the start of the name, alone or
        before a dot, or the name ending with it) or ``vllm`` (quantization/bitsandbytes.py ``is_layer_skipped_bnb``,
        0.17.1: the key equal to one dot-separated component or to a leading run of them, on vLLM's fused names).
        lm_head and the embeddings are 16-bit in any case and not counted here."""
        keys = [str(k) for k in (self.quant.get('llm_int8_skip_modules') or []) if k]
        if not keys or self.quant_method() != 'bitsandbytes':
            return 0

        def skipped(name: str) -> bool:
            if rule == 'vllm':
                parts = name.split('.')
                leading = {'.'.join(parts[: i + 1]) for i in range(len(parts))}
                return any(k in parts or k in leading for k in keys)
            for k in keys:
                try:
                    if re.match(f'{k}\\.', name) or re.match(k, name):
                        return True
                except re.error:
                    pass
                if name.endswith(k):
                    return True
            return False

        return sum(p for n, p in self.linear_modules(fused=rule == 'vllm') if skipped(n))

    def linear_bytes_per_weight(self, bnb_bits: int | None = None) -> float:
        """Bytes per weight of the quantisable linear layers."""
        if bnb_bits == 4:
            return 4.127 / 8
        if bnb_bits == 8:
            return 1.0 + 4 / 64  # int8 weights + per-row/column fp32 stats (approximate)
        method = self.quant_method()
        if method in ('gptq', 'awq'):
            bits = int(self.quant.get('bits') or self.quant.get('w_bit') or 4)
            g = int(self.quant.get('group_size') or self.quant.get('q_group_size') or 128)
            if g <= 0:
                g = self.hidden  # per-channel
            return bits / 8 + (2 + bits / 8) / g
        if method == 'fp8':
            return 1.0
        return float(self.dtype_bytes)

    def weight_bytes(self, bnb_bits: int | None = None, dtype_bytes: int | None = None) -> float:
        """Bytes of the model's weights as loaded (16-bit unless quantised)."""
        db = dtype_bytes or (2 if self.quant_method() in ('gptq', 'awq', 'fp8') else self.dtype_bytes)
        small = self.small_params() + self.embedding_params() + self.hidden + self.vision
        lin = self.linear_params()
        bnb_bits = bnb_bits or self.bnb_bits()
        if bnb_bits:  # the layers the checkpoint's llm_int8_skip_modules name stay 16-bit
            kept = self.skipped_linear_params()
            return (lin - kept) * self.linear_bytes_per_weight(bnb_bits) + (small + kept) * db
        if self.quant_method():
            return lin * self.linear_bytes_per_weight(bnb_bits) + small * db
        return (lin + small) * db

    def kv_bytes_per_token(self, kv_dtype_bytes: int = 2) -> int:
        """K and V for one token over the attention layers (peers-and-memory.md §E.7); divide by TP per rank."""
        layers = self.layers if self.attention_layers is None else self.attention_layers
        return 2 * layers * self.kv_dim * kv_dtype_bytes

    def lora_inputs(self, target_modules: list[str] | None) -> tuple[int, int]:
        """(Σ d_in, count) over one layer's adapted linears (q, k and v each count: PEFT casts the shared input
        once per module), for the activations the adapters keep."""
        h, q = self.hidden, self.q_dim
        inter = self.intermediate if not self.experts else self.moe_intermediate
        d_in = {'q_proj': h, 'k_proj': h, 'v_proj': h, 'o_proj': q, 'gate_proj': h, 'up_proj': h, 'down_proj': inter}
        targets = target_modules or ['all-linear']
        if any(t in ('all-linear', 'all') for t in targets):
            chosen = list(d_in)
        else:
            chosen = [name for name in d_in if any(t == name or t.endswith(name) for t in targets)]
        return sum(d_in[n] for n in chosen), len(chosen)

    def lora_params(self, rank: int, target_modules: list[str] | None) -> int:
        """Σ r × (d_in + d_out) over the adapted linears (peers-and-memory.md §E.3)."""
        h, q, kv = self.hidden, self.q_dim, self.kv_dim
        inter = self.intermediate if not self.experts else self.moe_intermediate
        shapes = {
            'q_proj': (h, q),
            'k_proj': (h, kv),
            'v_proj': (h, kv),
            'o_proj': (q, h),
            'gate_proj': (h, inter),
            'up_proj': (h, inter),
            'down_proj': (inter, h),
        }
        targets = target_modules or ['all-linear']
        if any(t in ('all-linear', 'all') for t in targets):
            chosen = list(shapes)
        else:
            chosen = [name for name in shapes if any(t == name or t.endswith(name) for t in targets)]
        per_layer = 0
        for name in chosen:
            d_in, d_out = shapes[name]
            mult = self.experts if self.experts and name in ('gate_proj', 'up_proj', 'down_proj') else 1
            per_layer += rank * (d_in + d_out) * mult
        return per_layer * self.layers


# transformers' defaults for the vision fields a saved config may leave out (Qwen2VLVisionConfig,
# Qwen2_5_VLVisionConfig); Qwen2.5-VL checkpoints state hidden_size 1280 and out_hidden_size = the LLM's width
VISION_DEFAULTS = {
    'qwen2_vl': {
        'depth': 32,
        'embed_dim': 1280,
        'mlp_ratio': 4,
        'in_channels': 3,
        'patch_size': 14,
        'temporal_patch_size': 2,
        'spatial_merge_size': 2,
    },
    'qwen2_5_vl': {
        'depth': 32,
        'hidden_size': 1280,
        'intermediate_size': 3420,
        'in_channels': 3,
        'patch_size': 14,
        'temporal_patch_size': 2,
        'spatial_merge_size': 2,
    },
    # transformers 5.19 Qwen3VLVisionConfig's defaults (configuration_qwen3_vl.py); Qwen3-VL-MoE's tower is the same
    # (Qwen3VLMoeVisionConfig)
    'qwen3_vl': {
        'depth': 27,
        'hidden_size': 1152,
        'intermediate_size': 4304,
        'in_channels': 3,
        'patch_size': 16,
        'temporal_patch_size': 2,
        'spatial_merge_size': 2,
        'num_position_embeddings': 2304,
        'deepstack_visual_indexes': [8, 16, 24],
        'out_hidden_size': 3584,
    },
}


# Model types whose vision tower is another family's: Qwen2.5-Omni's thinker has Qwen2.5-VL's (transformers
# modeling_qwen2_5_omni Qwen2_5OmniVisionEncoder: the same blocks, window attention and merger)
TOWER_FAMILY = {'qwen2_5_omni': 'qwen2_5_vl', 'qwen3_vl_moe': 'qwen3_vl'}


def audio_params(audio_config: dict | None) -> int:
    """Parameters of Qwen2.5-Omni's audio encoder (transformers modeling_qwen2_5_omni ``Qwen2_5OmniAudioEncoder``, a
    Whisper-style encoder): two biased Conv1d (kernel 3) from the mel bins, per layer biased q/v/out and bias-free k
    projections, two LayerNorms and a biased fc1/fc2, then ``ln_post``, the biased projection to the LLM's width and
    the two audio bos/eos embeddings. Counted with the vision tower (ms-swift freezes both with ``freeze_vit``). 0
    without a config; tests/test_memory.py checks the count against transformers' class."""
    if not isinstance(audio_config, dict):
        return 0
    e = int(audio_config.get('d_model', 1280))
    f = int(audio_config.get('encoder_ffn_dim', 5120))
    layers = int(audio_config.get('encoder_layers', 32))
    mel = int(audio_config.get('num_mel_bins', 128))
    out = int(audio_config.get('output_dim', 3584))
    layer = (4 * e * e + 3 * e) + 4 * e + (e * f + f) + (f * e + e)
    convs = (mel * 3 * e + e) + (e * 3 * e + e)
    return layers * layer + convs + 2 * e + (e * out + out) + 2 * out


def vision_params(model_type: str, vision_config: dict | None, llm_hidden: int) -> int:
    """Parameters of a Qwen2-VL / Qwen2.5-VL / Qwen3-VL vision tower with its patch merger, from ``vision_config``
    (transformers modeling_qwen2_vl / modeling_qwen2_5_vl: a bias-free Conv3d patch embedding; per block two norms,
    qkv and proj with biases, and an MLP; the merger's norm and two biased linears from 4 x width to the LLM's width;
    Qwen3-VL below). 0 for other families or without a vision config. tests/test_memory.py checks the count against
    transformers' own classes."""
    mt = model_type.lower()
    if mt not in VISION_DEFAULTS or not isinstance(vision_config, dict):
        return 0
    v = {**VISION_DEFAULTS[mt], **{k: x for k, x in vision_config.items() if x is not None}}
    patch = v['in_channels'] * v['temporal_patch_size'] * v['patch_size'] ** 2
    merged = v['spatial_merge_size'] ** 2
    if mt == 'qwen2_vl':
        e = int(v['embed_dim'])
        m = int(e * v['mlp_ratio'])
        out = int(v.get('hidden_size') or llm_hidden)
        block = 4 * e + (3 * e * e + 3 * e) + (e * e + e) + (e * m + m) + (m * e + e)  # LayerNorms, qkv, proj, fc1/2
        merger = 2 * e + (merged * e) ** 2 + merged * e + merged * e * out + out
    elif mt == 'qwen3_vl':
        # modeling_qwen3_vl: a biased Conv3d patch embedding and a learned position table; per block two LayerNorms,
        # qkv and proj, and a biased fc1/fc2 MLP; the merger's LayerNorm over the width and, for each deepstack
        # layer, one more merger whose LayerNorm is over the merged 4 x width (use_postshuffle_norm)
        e = int(v['hidden_size'])
        i = int(v['intermediate_size'])
        out = int(v.get('out_hidden_size') or llm_hidden)
        block = 4 * e + (3 * e * e + 3 * e) + (e * e + e) + (e * i + i) + (i * e + e)
        linears = (merged * e) ** 2 + merged * e + merged * e * out + out
        deep = len(v.get('deepstack_visual_indexes') or [])
        table = int(v['num_position_embeddings']) * e + e  # pos_embed, and the patch embedding's bias
        return patch * e + table + int(v['depth']) * block + 2 * e + linears + deep * (2 * merged * e + linears)
    else:
        e = int(v['hidden_size'])
        i = int(v['intermediate_size'])
        out = int(v.get('out_hidden_size') or llm_hidden)
        block = 2 * e + (3 * e * e + 3 * e) + (e * e + e) + 2 * (e * i + i) + (i * e + e)  # RMSNorms, qkv, proj, SwiGLU
        merger = e + (merged * e) ** 2 + merged * e + merged * e * out + out
    return patch * e + int(v['depth']) * block + merger
