"""The vision tower in the trainer (grpo_recipes/vision_train.py): ms-swift's freeze_vit default, image tokens, and the
tower's activations, against hand-derived figures."""

import dataclasses

from test_vllm_startup import QWEN25_VL_3B

from grpo_recipes.config import GRPOConfig
from grpo_recipes.hardware import Hardware
from grpo_recipes.memory import vision_train as vt
from grpo_recipes.memory.arch import Arch
from grpo_recipes.memory.inputs import FRAGMENTATION, Inputs
from grpo_recipes.memory.trainer import trainer_terms
from grpo_recipes.plan import build_plan


def test_freeze_vit_is_ms_swift_default():
    """ms-swift 4.6 swift/arguments/tuner_args.py: freeze_vit defaults to True; the guard's config agrees."""
    import dataclasses as dc

    from swift.arguments.tuner_args import TunerArguments

    field = {f.name: f for f in dc.fields(TunerArguments)}['freeze_vit']
    assert field.default is True
    assert GRPOConfig.from_argv(['--rlhf_type', 'grpo'])[0].freeze_vit is True


def test_image_tokens_at_ms_swift_max_pixels():
    """MAX_PIXELS=602112 (ms-swift's Qwen2.5-VL examples): smart_resize to multiples of 28 within the bound gives
    756 x 756 (27 x 28), 54 x 54 patches of 14, 2916 / 4 = 729 tokens; the processor's own bound 12845056 gives
    16384."""
    assert vt.tokens_per_image('qwen2_5_vl', 602112) == 729
    assert vt.tokens_per_image('qwen2_5_vl') == 16384
    assert vt.tokens_per_image('qwen2') == 0


def test_frozen_and_trained_tower_bytes():
    """Two rows of one 729-token image: 5832 patches. Frozen: the forward's live bytes per patch (7056 pixel bytes +
    (4 x 1280 + 3 x 3420) x 2) = 220,542,912 B. Trained with checkpointing: 2e x 32 blocks + one block (28e + 8i):
    5832 x 145120 = 846,339,840 B."""
    a = Arch.from_config(QWEN25_VL_3B)
    assert vt.vision_activation_bytes(a, True, 1, 602112, 2, True) == 220_542_912
    assert vt.vision_activation_bytes(a, False, 1, 602112, 2, True) == 846_339_840
    assert vt.vision_activation_bytes(a, True, 0, 602112, 2, True) == 0


def test_trainer_terms_hold_the_tower_where_it_lives():
    """A frozen tower's forward is a transient before the language model's (trainer_terms' late terms); a trained one
    adds its saved tensors to the activations."""
    a = Arch.from_config(QWEN25_VL_3B)
    base = [
        '--rlhf_type',
        'grpo',
        '--tuner_type',
        'full',
        '--per_device_train_batch_size',
        '2',
        '--num_generations',
        '2',
        '--max_length',
        '1024',
        '--max_completion_length',
        '256',
    ]
    frozen, _ = GRPOConfig.from_argv(base)
    trained, _ = GRPOConfig.from_argv(base + ['--freeze_vit', 'false'])
    plan = build_plan(frozen, {'NPROC_PER_NODE': '1', 'CUDA_VISIBLE_DEVICES': '0'}, Hardware(gpus=1))
    inp = Inputs(arch=a, capacity_gib=79.15, prompt_len=1024, images_per_prompt=1, max_pixels=602112)
    none = dataclasses.replace(inp, images_per_prompt=0)
    t0, t1 = trainer_terms(frozen, plan, none), trainer_terms(frozen, plan, inp)
    assert t1['activations'] == t0['activations']
    assert t1['vision_forward_temp'] == 220_542_912 * FRAGMENTATION
    u0, u1 = trainer_terms(trained, plan, none), trainer_terms(trained, plan, inp)
    assert abs(u1['activations'] - u0['activations'] - 846_339_840 * FRAGMENTATION) < 1
