"""The held-out eval in the guard: ms-swift's eval strategy default (it follows save_strategy when there is a val
set, SftArguments._init_eval_strategy) and its eval batch check (rlhf_trainers/args_mixin.py), and the eval batch
in a recipe's plan header."""

from helpers import make

from grpo_recipes.recipes import discover


def rules(report):
    return {f.rule for f in report.findings}


def test_a_val_set_without_eval_strategy_is_checked_like_ms_swift_does():
    # 1 process x 3 eval completions cannot be split into groups of 8: ms-swift raises at start-up
    _, report = make({'val_dataset': ['val.jsonl'], 'per_device_eval_batch_size': 3})
    assert 'batch.eval' in rules(report)
    _, ok = make({'val_dataset': ['val.jsonl'], 'per_device_eval_batch_size': 8})
    assert 'batch.eval' not in rules(ok)
    # no val set: ms-swift turns eval off, whatever the batch
    _, none = make({'per_device_eval_batch_size': 3})
    assert 'batch.eval' not in rules(none)
    # eval_strategy no: off
    _, off = make({'val_dataset': ['val.jsonl'], 'per_device_eval_batch_size': 3, 'eval_strategy': 'no'})
    assert 'batch.eval' not in rules(off)


def test_every_recipe_evaluates_and_its_header_shows_the_eval_batch():
    for r in discover():
        if r.path.parent.name == 'examples':
            continue
        text = r.path.read_text()
        batch = next(line for line in text.splitlines() if line.startswith('# batch:'))
        assert '; eval every 50 steps: ' in batch, r.name
        # Megatron-SWIFT has no eval_strategy: a val_dataset and eval_steps turn its eval on (megatron_args.py)
        on = 'eval_steps: 50' if r.command else 'eval_strategy: steps'
        assert 'val_dataset: output/' in text and on in text, r.name
