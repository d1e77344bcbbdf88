"""``grpo-data stats/filter --completions``: the console and JSON side of passrate.py."""

from __future__ import annotations

import json
import sys

from .formats import InputError
from .passrate import PassRates, filter_by_pass_rate, parse_range, pass_rates, read_completions


def completion_rates(opts, tok) -> PassRates:
    from .pipeline import parse_columns

    log = read_completions(opts.completions, opts.reward)
    return pass_rates(opts.input, log, tok, parse_columns(opts.columns), opts.system)


def print_rates(con, r: PassRates) -> None:
    from rich.table import Table

    d = r.to_dict()
    con.print(
        f'[bold]pass rates[/] from {d["completions_log"]} (reward {d["reward"]!r}, a pass above '
        f'{d["success_threshold"]:g}): {d["rows_seen"]:,} of {d["rows"]:,} rows seen, '
        f'{d["rows_unseen"]:,} never logged'
    )
    t = Table()
    t.add_column('pass rate')
    t.add_column('rows', justify='right')
    t.add_column('share', justify='right')
    seen = max(d['rows_seen'], 1)
    for b in d['pass_rate_histogram']:
        hi = ']' if b['high'] == 1.0 else ')'
        t.add_row(f'[{b["low"]:.3f}, {b["high"]:.3f}{hi}', f'{b["rows"]:,}', f'{b["rows"] / seen:.0%}')
    con.print(t)
    if d['mean_pass_rate'] is not None:
        con.print(f'mean pass rate {d["mean_pass_rate"]:.1%}')
    if d['groups']:
        con.print(
            f'groups with all rewards equal (zero advantage): {d["zero_variance_groups"]:,} of '
            f'{d["groups"]:,} ({d["zero_variance_share"]:.0%}), as logged'
        )
    if d['unmatched_prompts']:
        con.print(
            f'{d["unmatched_prompts"]:,} logged prompt(s) ({d["unmatched_completions"]:,} completions) match '
            f'no row of this data (eval rows, another dataset, or another chat template)'
        )
    if d['repeated_step_tables_skipped']:
        con.print(f'{d["repeated_step_tables_skipped"]} table(s) at an already logged step (eval log calls) not read')


def cmd_filter_pass_rate(opts) -> int:
    if not (opts.completions and opts.keep_pass_rate):
        print('error: a pass-rate filter needs both --completions LOG and --keep-pass-rate LOW:HIGH', file=sys.stderr)
        return 2
    if opts.max_length is not None:
        print(
            'error: --max-length and --keep-pass-rate are two filters: run grpo-data filter once for each (the '
            'length filter first)',
            file=sys.stderr,
        )
        return 2
    keep = parse_range(opts.keep_pass_rate)
    from .tokenize import ChatTokenizer

    tok = ChatTokenizer(opts.tokenizer)
    rates = completion_rates(opts, tok)
    s = filter_by_pass_rate(opts.input, opts.output, rates, keep, opts.rejects)
    s.input = opts.input_label
    if opts.json:
        print(json.dumps(s.to_dict(), indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    con = Console()
    con.print(
        f'[bold]grpo-data filter[/]: keep rows whose pass rate lies in [{keep[0]:g}, {keep[1]:g}] '
        f'(rows never logged are kept)'
    )
    t = Table()
    t.add_column('rows')
    t.add_column('count', justify='right')
    t.add_column('written to')
    t.add_row('input', f'{s.input_rows:,}', s.input)
    t.add_row('kept', f'{s.kept:,}', s.output)
    t.add_row('  of which never logged', f'{s.kept_unseen:,}', '')
    t.add_row('rejected (pass rate)', f'{s.rejected:,}', s.rejects)
    t.add_row('malformed', f'{s.malformed:,}', s.rejects)
    con.print(t)
    return 0


__all__ = ['completion_rates', 'print_rates', 'cmd_filter_pass_rate', 'InputError']
