"""Published launch scripts (tests/data/wild/reading/README.md), read as their authors run them. The expected layout
is worked out by hand from each script, as its comments say it runs."""

from pathlib import Path

from grpo_recipes.frontends import read_launch

READING = Path(__file__).resolve().parent / 'data' / 'wild' / 'reading'


def test_food_r1_runs_swift_rlhf_from_its_environment(tmp_path):
    """Food-R1's auxiliary GRPO (scripts/train_grpo_auxiliary.sh): an ms-swift checkout in $SWIFT_ROOT, the initial
    model and datasets from the environment (empty by default, and then the script skips the run), 8 visible GPUs by
    default, one node: `torchrun --standalone --nproc_per_node 8 swift/cli/rlhf.py`, vLLM colocated with tensor
    parallel min(GPUS, 4) = 4."""
    data = tmp_path / 'vireo172.jsonl'
    data.write_text('{}\n')
    env = {'SWIFT_ROOT': str(tmp_path), 'AUX_INITIAL_MODEL': 'Qwen/Qwen2.5-VL-7B-Instruct',
           'VIREO172_RL_DATASETS': str(data)}  # fmt: skip
    launch = read_launch([str(READING / 'food-r1-train-grpo-auxiliary.sh')], environ=env)
    argv = launch.argv
    assert launch.framework == 'swift' and launch.env['NPROC_PER_NODE'] == '8'
    assert argv[argv.index('--model') + 1] == 'Qwen/Qwen2.5-VL-7B-Instruct'
    assert argv[argv.index('--vllm_tensor_parallel_size') + 1] == '4'
    assert argv[argv.index('--dataset') + 1] == str(data)
    assert argv[argv.index('--reward_funcs') + 1 : argv.index('--reward_funcs') + 3] == [
        'vireo172_format',
        'vireo172_ingredient_match',
    ]
