"""``check --replay``: torch's reserve for the launch's own training step from the traced step's replay (what
``grpo-guard trace`` prints, at the planned prompt and shorter ones: the largest), in place of the closed form; any
other shape (a fix's) keeps the closed form. A small
Qwen2-shaped config keeps the trace to seconds (fake tensors, no GPU)."""

import json

import pytest

from grpo_recipes.cli.guard import main

SMALL = {
    'architectures': ['Qwen2ForCausalLM'],
    'model_type': 'qwen2',
    'hidden_size': 256,
    'intermediate_size': 704,
    'num_hidden_layers': 2,
    'num_attention_heads': 4,
    'num_key_value_heads': 2,
    'vocab_size': 32000,
    'tie_word_embeddings': True,
    'max_position_embeddings': 4096,
    'torch_dtype': 'bfloat16',
}
LAUNCH = (
    'rlhf_type: grpo\nmodel: Qwen/Qwen2.5-0.5B-Instruct\ntuner_type: {tuner}\ntorch_dtype: bfloat16\n'
    'per_device_train_batch_size: 8\nnum_generations: 8\nmax_length: 64\nmax_completion_length: 256\n'
    'reward_funcs: [format]\ndataset: [data.jsonl]\nuse_vllm: false\ngradient_checkpointing: true\n{extra}'
)


@pytest.fixture
def small(tmp_path):
    (tmp_path / 'small').mkdir()
    (tmp_path / 'small' / 'config.json').write_text(json.dumps(SMALL))
    return tmp_path / 'small'


def _json(capsys, argv) -> dict:
    code = main(argv)
    out = capsys.readouterr()
    assert code in (0, 1), out.err
    return json.loads(out.out)


def _train(report) -> dict:
    return report['memory'][0]['phase_parts']['train']


def test_replay_takes_the_reserve_trace_prints(tmp_path, small, capsys, write_yaml):
    cfg = str(write_yaml(LAUNCH.format(tuner='lora', extra='')))
    hw = ['--gpus', '1', '--gpu-type', 'A100-80G', '--model-config', str(small)]
    closed = _json(capsys, ['check', cfg, *hw, '--json'])
    replayed = _json(capsys, ['check', cfg, *hw, '--json', '--replay'])
    traced = _json(capsys, ['trace', cfg, '--model-config', str(small), '--json', '--force'])
    reserve = traced['reserved_peak_gib'] - traced['traced_peak_gib']
    # the largest over the planned prompt and shorter ones: at least the planned shape's (trace's figure)
    assert _train(replayed)['allocator_reserve'] >= reserve - 0.011
    assert _train(replayed)['allocator_reserve'] != _train(closed)['allocator_reserve']
    # everything else of the step is the analytic model's, as without --replay
    for term in ('weights', 'activations', 'logits'):
        assert _train(replayed)[term] == _train(closed)[term]
    line = next(a for a in replayed['assumptions'] if '(--replay)' in a)
    # ms-swift 4.6: the old policy's pass always, the reference's at its default beta 0.04; a device_map load
    assert "no-grad passes: the old policy's and the reference's" in line and 'device_map' in line
    assert not any('--replay' in a for a in closed['assumptions'])


def test_a_fix_of_another_shape_keeps_the_closed_form(small):
    """The replayed reserve belongs to the launch's shape; a micro-batch the fix search tries is planned as before."""
    from dataclasses import replace

    from grpo_recipes.allocconf import DEFAULT
    from grpo_recipes.config import GRPOConfig
    from grpo_recipes.hardware import Hardware
    from grpo_recipes.memory.arch import Arch
    from grpo_recipes.memory.estimate import estimate
    from grpo_recipes.memory.inputs import Inputs
    from grpo_recipes.memory.replay import replay_key
    from grpo_recipes.plan import build_plan

    cfg, _ = GRPOConfig.from_argv(
        ['--rlhf_type', 'grpo', '--per_device_train_batch_size', '8', '--max_completion_length', '256']
    )
    inp = Inputs(Arch.from_config(SMALL), 80.0, prompt_len=64, alloc=DEFAULT)
    own = replace(inp, replayed=(replay_key(cfg, inp), 3 * 2**30))
    plan = build_plan(cfg, {}, Hardware(gpus=1))
    assert estimate(cfg, plan, own)[0].phase_parts['train']['allocator_reserve'] == 3.0
    fix = replace(cfg, per_device_train_batch_size=4)
    fix_plan = build_plan(fix, {}, Hardware(gpus=1))
    assert estimate(fix, fix_plan, own)[0].phase_parts == estimate(fix, fix_plan, inp)[0].phase_parts


def test_replay_declines_a_sharded_step_and_says_so(small, capsys, write_yaml):
    cfg = str(write_yaml(LAUNCH.format(tuner='full', extra='deepspeed: zero3\n')))
    hw = ['--gpus', '2', '--gpu-type', 'A100-80G', '--model-config', str(small)]
    closed = _json(capsys, ['check', cfg, *hw, '--json'])
    replayed = _json(capsys, ['check', cfg, *hw, '--json', '--replay'])
    assert _train(replayed) == _train(closed)
    assert any('not replayed under DeepSpeed' in a for a in replayed['assumptions'])


def test_a_model_transformers_cannot_build_is_one_line_and_exit_2(tmp_path, capsys, write_yaml):
    """A config.json whose model_type transformers does not know: one line naming it, no traceback, exit 2 (the
    trace CLI says the same)."""
    (tmp_path / 'odd').mkdir()
    (tmp_path / 'odd' / 'config.json').write_text(json.dumps({**SMALL, 'model_type': 'not_a_model_type'}))
    cfg = str(write_yaml(LAUNCH.format(tuner='lora', extra='')))
    code = main(
        ['check', cfg, '--gpus', '1', '--gpu-type', 'A100-80G', '--model-config', str(tmp_path / 'odd'), '--replay']
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert '--replay: cannot build the model' in err[0] and 'not_a_model_type' in err[0] and len(err[0]) < 240
