"""grpo-data stats/filter --completions: per-prompt pass rates from ms-swift's completions.jsonl.

Two logs: one written by a real `swift rlhf` run (ms-swift 4.6, CPU, the tiny Qwen2 of tests/tiny_model.py, the
qwen2.5-7b-instruct/lora-2xa100-80g launcher with log_completions true and an eval at step 2; tests/data/passrate),
and one built here in the same format (a table per log call: step, prompt as the Qwen2.5 template renders it,
completion, one column per reward class, advantages, solution) with pass rates chosen by hand.
"""

import json

import pytest
from conftest import ROOT, run_cli

DATA = ROOT / 'tests' / 'data' / 'passrate'
QWEN = (
    '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n'
    '<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n'
)
R1 = '<｜begin▁of▁sentence｜><｜User｜>{q}<｜Assistant｜><think>\n'  # another template: matched by the user turn


def grpo_data(*args):
    return run_cli('data_tools.cli', *args)


def test_real_swift_log_matches_its_training_rows_and_skips_the_eval_tables():
    proc = grpo_data(
        'stats',
        str(DATA / 'tiny_cpu_train.jsonl'),
        '--completions',
        str(DATA / 'tiny_cpu_completions.jsonl'),
        '--json',
        '--quiet',
    )
    assert proc.returncode == 0, proc.stderr
    c = json.loads(proc.stdout)['completions']
    # 4 tables: step 1, step 2, then two eval log calls at step 2 (not training rollouts)
    assert c['logged_tables'] == 2 and c['repeated_step_tables_skipped'] == 2
    assert c['reward'] == 'MathAccuracy'  # `accuracy` is logged under its class name
    assert c['unmatched_prompts'] == 0 and c['rows'] == 8 and c['rows_seen'] == 2
    assert c['pass_rates'] == [0.0, 0.0]  # a random tiny model never answers right
    # the toy reward varies inside each group: the summed reward has variance, as ms-swift's std sees it
    assert c['groups'] == 2 and c['zero_variance_groups'] == 0


def rows(n):
    return [
        {'messages': [{'role': 'user', 'content': f'Question {i}: what is {i} + {i}?'}], 'solution': str(2 * i)}
        for i in range(n)
    ]


def table(step, groups, template=QWEN):
    """groups: (row, [0/1 accuracy per completion])"""
    t = {'step': [], 'prompt': [], 'completion': [], 'MathAccuracy': [], 'advantages': [], 'solution': []}
    for r, scores in groups:
        for s in scores:
            t['step'].append(str(step))
            t['prompt'].append(template.format(q=r['messages'][0]['content']))
            t['completion'].append('\\boxed{' + (r['solution'] if s else '0') + '}')
            t['MathAccuracy'].append(float(s))
            t['advantages'].append(0.0)
            t['solution'].append(r['solution'])
    return json.dumps(t)


@pytest.fixture
def built(tmp_path):
    data = rows(6)
    (tmp_path / 'train.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in data))
    log = [
        table(1, [(data[0], [1, 1, 1, 1]), (data[1], [0, 0, 0, 0])]),
        table(2, [(data[2], [1, 0, 1, 0]), (data[3], [1, 1, 1, 0])]),
        table(2, [(data[5], [0, 0, 0, 0])]),  # an eval call at step 2: not read
        table(3, [(data[3], [1, 1, 1, 1]), (data[4], [1, 0, 0, 0])], template=R1),  # row 3 again: 7 of 8
        table(4, [({'messages': [{'role': 'user', 'content': 'not in the data'}], 'solution': '1'}, [1, 0])]),
    ]
    (tmp_path / 'completions.jsonl').write_text('\n'.join(log) + '\n')
    return tmp_path


def test_stats_pass_rates_histogram_and_zero_variance_share(built):
    proc = grpo_data(
        'stats', str(built / 'train.jsonl'), '--completions', str(built / 'completions.jsonl'), '--json', '--quiet'
    )
    assert proc.returncode == 0, proc.stderr
    c = json.loads(proc.stdout)['completions']
    # rows 0..4 seen (row 4 only through the other template's user turn), row 5 only in the eval table
    assert c['rows_seen'] == 5 and c['rows_unseen'] == 1
    assert c['pass_rates'] == [0.0, 0.25, 0.5, 0.875, 1.0]
    assert c['unmatched_prompts'] == 1 and c['unmatched_completions'] == 2
    # groups of the matched prompts: 6; all equal: row 0's, row 1's, row 3's second -> 3 of 6
    assert c['groups'] == 6 and c['zero_variance_groups'] == 3 and c['zero_variance_share'] == 0.5
    hist = {(b['low'], b['high']): b['rows'] for b in c['pass_rate_histogram']}
    assert hist[(0.0, 0.125)] == 1 and hist[(0.25, 0.375)] == 1 and hist[(0.5, 0.625)] == 1
    assert hist[(0.875, 1.0)] == 2 and sum(hist.values()) == 5
    text = grpo_data('stats', str(built / 'train.jsonl'), '--completions', str(built / 'completions.jsonl'), '--quiet')
    assert text.returncode == 0 and 'groups with all rewards equal (zero advantage): 3 of 6 (50%)' in text.stdout


def test_filter_keeps_the_range_and_unseen_rows_and_rejects_the_rest_with_their_rate(built):
    out = built / 'kept.jsonl'
    proc = grpo_data(
        'filter',
        str(built / 'train.jsonl'),
        '-o',
        str(out),
        '--completions',
        str(built / 'completions.jsonl'),
        '--keep-pass-rate',
        '0.1:0.9',
        '--json',
        '--quiet',
    )
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert (s['input_rows'], s['kept'], s['kept_unseen'], s['rejected_pass_rate']) == (6, 4, 1, 2)
    src = (built / 'train.jsonl').read_text().splitlines()
    assert out.read_text().splitlines() == [src[2], src[3], src[4], src[5]]  # byte for byte, in order
    rejects = [json.loads(ln) for ln in (built / 'kept.rejects.jsonl').read_text().splitlines()]
    assert [(r['line'], r['pass_rate'], r['reason']) for r in rejects] == [(1, 1.0, 'pass_rate'), (2, 0.0, 'pass_rate')]
    assert rejects[0]['raw'] == src[0]


def test_filter_needs_one_filter_and_a_valid_range(built):
    base = ['filter', str(built / 'train.jsonl'), '-o', str(built / 'k.jsonl')]
    none = grpo_data(*base)
    assert none.returncode == 2 and '--max-length N' in none.stderr
    both = grpo_data(
        *base, '--max-length', '256', '--completions', str(built / 'completions.jsonl'), '--keep-pass-rate', '0:1'
    )
    assert both.returncode == 2 and 'two filters' in both.stderr
    bad = grpo_data(*base, '--completions', str(built / 'completions.jsonl'), '--keep-pass-rate', '0.9:0.1')
    assert bad.returncode != 0 and 'LOW <= HIGH' in bad.stderr
    assert not (built / 'k.jsonl').exists()


def test_reward_column_by_its_reward_funcs_name_or_refused(built):
    ok = grpo_data(
        'stats',
        str(built / 'train.jsonl'),
        '--completions',
        str(built / 'completions.jsonl'),
        '--reward',
        'accuracy',
        '--json',
        '--quiet',
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)['completions']['reward'] == 'MathAccuracy'
    bad = grpo_data(
        'stats',
        str(built / 'train.jsonl'),
        '--completions',
        str(built / 'completions.jsonl'),
        '--reward',
        'format',
        '--quiet',
    )
    assert bad.returncode != 0 and "no reward column 'format'" in bad.stderr


def test_a_logged_prompt_is_the_rows_rendered_chat_template_exactly():
    """ms-swift's rendering (template.encode + safe_decode) equals the bundled Qwen2.5 Jinja template's."""
    from data_tools.passrate import PromptMatcher, read_completions
    from data_tools.tokenize import ChatTokenizer

    log = read_completions(DATA / 'tiny_cpu_completions.jsonl')
    matcher = PromptMatcher(ChatTokenizer(None))
    for i, line in enumerate((DATA / 'tiny_cpu_train.jsonl').read_text().splitlines()):
        matcher.add(i, json.loads(line), None)
    assert all(matcher.exact.get(p) is not None for p in log.prompts)
