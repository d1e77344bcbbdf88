"""The warm parser pool (grpo_recipes/parse_pool.py), which serves this suite's `validate` runs, gives the same results
as a fresh worker process: the same launches go through ms-swift's and TRL's real parsers both ways, and every field
but the timings must agree. A request the pool cannot stand for (another environment) goes to a fresh worker."""

import os
from dataclasses import asdict

import pytest

from grpo_recipes import parse_pool
from grpo_recipes.frontends import read_launch
from grpo_recipes.realparse import validate_many, validate_trl_many

pytestmark = pytest.mark.slow

M = 'Qwen/Qwen2.5-7B-Instruct'
D = ['--dataset', 'data.jsonl']
SWIFT = [
    ['swift', 'rlhf', '--rlhf_type', 'grpo', '--model', M, '--tuner_type', 'lora', '--num_generations', '2', *D],
    # refused by ms-swift's own check: the generation batch is not divisible by num_generations
    ['swift', 'rlhf', '--rlhf_type', 'grpo', '--model', M, '--per_device_train_batch_size', '3', *D],
    # a 3.x name: ms-swift 4.6 leaves it in remaining_argv
    ['swift', 'rlhf', '--rlhf_type', 'grpo', '--model', M, '--train_type', 'lora', *D],
    # argparse's own SystemExit on a bad choice
    ['swift', 'rlhf', '--rlhf_type', 'grpo', '--model', M, '--tuner_type', 'nonsense', *D],
]
TRL = [
    ['accelerate', 'launch', '--num_processes', '2', 'train_grpo.py', '--model_name_or_path', M],
    ['accelerate', 'launch', 'train_grpo.py', '--model_name_or_path', M, '--per_device_train_batch_size', '3'],
    ['trl', 'vllm-serve', '--model', M, '--tensor_parallel_size', '2'],
]
TIMINGS = ('parse_s', 'total_s', 'import_s')


def _results(fn, argvs, env):
    launches = [read_launch(['--', *a], environ={'NPROC_PER_NODE': '2'}) for a in argvs]
    saved = os.environ.get(parse_pool.ENV_VAR)
    try:
        if env is None:
            os.environ.pop(parse_pool.ENV_VAR, None)
        else:
            os.environ[parse_pool.ENV_VAR] = env
        out = []
        for r in fn(launches):
            d = asdict(r)
            for k in TIMINGS:
                d.pop(k, None)
            out.append(d)
        return out
    finally:
        if saved is None:
            os.environ.pop(parse_pool.ENV_VAR, None)
        else:
            os.environ[parse_pool.ENV_VAR] = saved


@pytest.fixture(scope='module')
def pool(parse_pool):
    """This process's pool, ready (conftest starts it; a run with GRPO_TESTS_FRESH_PARSERS=1 has none)."""
    import time

    if parse_pool is None:
        pytest.skip('no parser pool in this run (GRPO_TESTS_FRESH_PARSERS=1)')
    for _ in range(600):
        if os.path.exists(parse_pool):
            return parse_pool
        time.sleep(0.1)
    pytest.fail('the parser pool did not start in 60 s')


@pytest.mark.parametrize(
    'fn,argvs,oks',
    [(validate_many, SWIFT, [True, False, False, False]), (validate_trl_many, TRL, [True, False, True])],
    ids=['ms-swift', 'trl'],
)
def test_pool_gives_what_a_fresh_worker_gives(pool, fn, argvs, oks):
    fresh = _results(fn, argvs, None)
    assert [r['ok'] for r in fresh] == oks, [r['message'] for r in fresh]
    before = parse_pool.served
    assert _results(fn, argvs, pool) == fresh
    # one request, all the launches: the pool answered it
    assert parse_pool.served == before + 1, parse_pool.differs({**os.environ, 'MASTER_PORT': '1'})


def test_pool_stands_aside_for_another_environment(pool):
    # huggingface_hub reads HF_ENDPOINT when imported: a pool imported without this value cannot stand for it
    env = {**os.environ, 'MASTER_PORT': '1', 'HF_ENDPOINT': 'http://127.0.0.1:9/not-the-pools'}
    assert parse_pool.pooled('grpo_recipes.frontends.swift.worker', '[]', env, None, None, 5.0) is None
    env = {**os.environ, 'MASTER_PORT': '1'}
    served = parse_pool.pooled('grpo_recipes.frontends.swift.worker', '[]', env, None, None, 60.0)
    assert served is not None and served[0] == 0, parse_pool.differs(env)
