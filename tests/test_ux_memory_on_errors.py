"""A rule error that decides the batch does not hide the memory table when it can be computed (issue 21, 23)."""

from helpers import make, rules_of

from grpo_recipes.cli.render import print_report


def test_batch_error_keeps_the_memory_table(capsys):
    # 7 generations do not divide a micro-batch of 8 completions on one process (ms-swift's own check)
    _, report = make({'num_generations': 7})
    assert 'batch.num-generations-divides' in rules_of(report) or any(r.startswith('batch.') for r in rules_of(report))
    assert not report.ok
    assert report.memory, 'the memory of the launch as written can be computed and must be shown'
    assert not any(f.rule.startswith('memory.') for f in report.findings)  # no memory verdict on it
    assert not report.fixes
    print_report(report)
    out = capsys.readouterr().out
    assert 'Predicted memory per GPU' in out and 'REFUSED' in out
