"""The memory table's one basis and its verdict column: a row with errors open that decide the batch or the processes
is ``withheld`` (figures shown, no verdict), a row that OOMs only with long inputs says ``OOM if long`` (a warning,
not a refusal), and the title names the device basis whichever phase peaks."""

from helpers import make
from test_long_completions import ENV, HW, OVER

from grpo_recipes.cli.render import MEMORY_BASIS, make_console, print_report


def _printed(report, capsys, monkeypatch):
    monkeypatch.setenv('COLUMNS', '160')
    print_report(report, make_console(), allow_unchecked=True)
    return capsys.readouterr().out


def test_a_layout_error_withholds_the_verdict(capsys, monkeypatch):
    _, report = make({'num_generations': 7})  # ms-swift's own batch check fails: the launch will not start
    assert report.memory and all(m.verdict == 'withheld' for m in report.memory)
    out = _printed(report, capsys, monkeypatch)
    row = next(line for line in out.splitlines() if 'train+vllm' in line)
    assert 'withheld' in row and 'fits' not in row and 'OOM' not in row


def test_an_oom_only_with_long_completions_says_so(capsys, monkeypatch):
    _, report = make(OVER, env=ENV, hw=HW, completion_mean=1024)
    assert report.ok and any(f.rule == 'memory.oom-if-long-completions' for f in report.findings)
    train = [m for m in report.memory if m.role != 'rollout']
    assert train and all(m.peak_fraction > 1 and m.verdict == 'OOM if long' for m in train)
    out = _printed(report, capsys, monkeypatch)
    rows = [line for line in out.splitlines() if line.split()[:2] == ['0-7', 'train']]
    assert rows and all('OOM if long' in r for r in rows)


def test_a_refused_oom_stays_oom():
    _, report = make(OVER, env=ENV, hw=HW, completion_mean=3500)
    assert not report.ok and all(m.verdict == '' for m in report.memory)


def test_one_title_for_every_launch(capsys, monkeypatch):
    for overrides in ({}, {'sleep_level': 1, 'tuner_type': 'full', 'deepspeed': 'zero3'}):
        _, report = make(overrides)
        out = _printed(report, capsys, monkeypatch)
        assert MEMORY_BASIS in ' '.join(out.split()), overrides
