"""One verdict per check, the same in every output: the console line, ``--json`` and the exit status.

A check is OK (exit 0), REFUSED (errors, exit 1) or UNCHECKED (rules pass but memory was not predicted, or the
launch's training command was not read at all (``Launch.unread_trainer``: only its rollout server was): exit 1
unless the user accepts it with ``--allow-unchecked``). ``grpo-guard check/run`` and ``grpo-recipes plan`` all
decide through here, so a JSON consumer, a shell ``$?`` and a reader of the console see the same thing.
"""

from __future__ import annotations


def verdict(report) -> str:
    """'REFUSED', 'UNCHECKED' or 'OK' (what the console's last line says)."""
    if not report.ok or report.stop:
        return 'REFUSED'
    return 'UNCHECKED' if report.unchecked else 'OK'


def report_json(report, allow_unchecked: bool = False) -> dict:
    """The report as JSON with ``ok`` meaning what the exit status means (True exactly when it is 0);
    ``rules_ok`` keeps the rules-only answer and ``verdict`` names the case."""
    d = report.to_dict()
    d['rules_ok'] = report.ok
    d['ok'] = report.exit_code(allow_unchecked) == 0
    d['verdict'] = verdict(report)
    d['allow_unchecked'] = allow_unchecked
    return d


def not_launching(report) -> str:
    """Why `run` does not launch, with the one way out that applies (errors: fix or --force; UNCHECKED only:
    give what memory needs, or accept it)."""
    if report.stop:
        return f'grpo-guard: not launching ({report.stop})'
    if not report.ok:
        return 'grpo-guard: not launching (errors above); fix them or pass --force'
    if report.launch.unread_trainer:
        return f'grpo-guard: not launching ({report.unchecked}); pass --allow-unchecked to launch without that check'
    return (
        f'grpo-guard: not launching (memory not checked: {report.memory_unchecked}); give --model-config DIR '
        f'or --gpu-type T so it can be checked, or pass --allow-unchecked to launch without that check'
    )
