"""``grpo-data``: measure and filter GRPO datasets by token length, as the model sees them.

    grpo-data filter INPUT -o OUTPUT --max-length N [--tokenizer DIR] [--mode prompt|full]
    grpo-data stats INPUT [--tokenizer DIR] [--coverage 0.99] [--max-completion-length N] [--plot F]
    grpo-data stats INPUT --completions completions.jsonl          (+ per-prompt pass rates from a run's log)
    grpo-data filter INPUT -o OUTPUT --completions completions.jsonl --keep-pass-rate 0.05:0.95

Exit status: 0 done, 1 the data cannot be used or the output cannot be written (named file/line and the fix),
2 usage or unreadable input.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from grpo_recipes.cli.common import package_version, parse_command, pipe_safe_stdout

EPILOG = """examples:
  grpo-data stats data.jsonl --tokenizer /models/Qwen2.5-7B-Instruct --max-completion-length 1024
  grpo-data filter data.jsonl -o data.filtered.jsonl --max-length 512 --tokenizer /models/Qwen2.5-7B-Instruct
  grpo-data filter data.parquet -o kept.parquet --max-length 1024 --columns '{"problem": "query"}'

Lengths are the prompt as the model sees it: the tokenizer's own chat template (with its default
system prompt, or --system), add_generation_prompt=True, the same count ms-swift compares with
max_length in GRPO. --mode full measures the whole conversation including the answer (SFT data).
Without --tokenizer the bundled Qwen2.5 tokenizer is used."""


def _dataset_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        'input',
        nargs='+',
        metavar='DATASET',
        help='what `swift rlhf --dataset` takes: a local .jsonl, '
        '.json, .csv, .parquet or saved HF datasets dir (fast path), or a hub id, `id:subset`, `path#N` '
        "(N rows sampled as ms-swift samples them), several at once (read by ms-swift's loader)",
    )
    p.add_argument(
        '--use-hf',
        action='store_true',
        default=None,
        help='hub ids are Hugging Face ids (default: ModelScope, or USE_HF=1, as in ms-swift)',
    )
    p.add_argument('--dataset-num-proc', type=int, default=1, help="processes for ms-swift's dataset preprocessing")
    p.add_argument(
        '--streaming',
        action='store_true',
        help='read hub/syntax datasets row by row (ms-swift '
        '--streaming): memory stays flat for datasets larger than RAM',
    )


def _common(p: argparse.ArgumentParser) -> None:
    _dataset_args(p)
    p.add_argument('--tokenizer', help='tokenizer/model dir or a hub id in the local cache (default: bundled Qwen2.5)')
    p.add_argument(
        '--mode',
        choices=('prompt', 'full'),
        default='prompt',
        help='prompt: GRPO prompt length (default); full: prompt + answer',
    )
    p.add_argument('--columns', help='ms-swift --columns JSON rename, e.g. \'{"problem": "query"}\'')
    p.add_argument('--system', help="system prompt to measure with (default: the template's own default)")
    p.add_argument('--json', action='store_true', help='print one JSON object instead of a table')
    p.add_argument('--quiet', action='store_true', help='no progress bar')
    p.add_argument('--chunk-rows', type=int, default=2048, help=argparse.SUPPRESS)


def _completions_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        '--completions',
        type=Path,
        metavar='LOG',
        help="ms-swift's completions.jsonl of a run on this "
        'data (log_completions true): per-prompt pass rates and the share of all-equal reward groups',
    )
    p.add_argument(
        '--reward',
        help='with --completions: the reward column that says pass/fail (default: accuracy, or the only reward column)',
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog='grpo-data',
        description='Token-length stats and filtering for ms-swift GRPO '
        "datasets, measured with the model's own tokenizer and chat template.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument('--version', action='version', version=f'grpo-data (grpo-recipes) {package_version()}')
    sub = p.add_subparsers(dest='cmd', metavar='COMMAND')
    f = sub.add_parser(
        'filter',
        help='keep rows that fit --max-length; every other row goes to a rejects file',
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(f)
    f.add_argument('-o', '--output', type=Path, required=True, help="kept rows, in the input's format")
    f.add_argument(
        '--max-length',
        type=int,
        help="the recipe's max_length (GRPO prompt limit); required unless --keep-pass-rate is given",
    )
    f.add_argument('--rejects', type=Path, help='rejects file (JSON lines; default: OUTPUT.rejects.jsonl)')
    _completions_args(f)
    f.add_argument(
        '--keep-pass-rate',
        metavar='LOW:HIGH',
        help='with --completions: keep rows whose pass rate lies '
        'in [LOW, HIGH] (e.g. 0.05:0.95) and rows the log never saw; the others go to the rejects file '
        'with their pass rate',
    )
    s = sub.add_parser(
        'stats',
        help='length distribution; the max_length for a coverage; vllm_max_model_len',
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(s)
    s.add_argument('--coverage', type=float, default=0.99, help='fraction of rows max_length must keep (0.99)')
    s.add_argument('--max-completion-length', type=int, help='recipe max_completion_length: prints vllm_max_model_len')
    s.add_argument('--plot', type=Path, help='write a histogram PNG here')
    _completions_args(s)
    g = sub.add_parser(
        'prepare-gsm8k', help='GSM8K question/answer rows -> ms-swift messages + `solution` for the accuracy reward'
    )
    _dataset_args(g)
    g.add_argument('-o', '--output', type=Path, required=True)
    g.add_argument('--json', action='store_true')
    return p


def resolve_input(opts, scratch: Path) -> Path:
    """One plain local path: itself (fast path). Otherwise ms-swift's loader writes its rows to ``scratch``."""
    from .swift_datasets import is_plain_path, looks_local, materialise

    opts.input_label = ' '.join(opts.input)
    if len(opts.input) == 1 and is_plain_path(opts.input[0]):
        return Path(opts.input[0])
    for spec in opts.input:
        if looks_local(spec):
            from .formats import InputError

            raise InputError(f'{spec}: no such file or directory')
    from .pipeline import parse_columns

    columns = parse_columns(getattr(opts, 'columns', None))
    info = materialise(
        opts.input,
        scratch,
        use_hf=opts.use_hf,
        num_proc=opts.dataset_num_proc,
        streaming=opts.streaming,
        columns=columns,
    )
    if not getattr(opts, 'json', False) and not getattr(opts, 'quiet', False):
        print(
            f"grpo-data: {info['rows']:,} rows from {', '.join(opts.input)} via ms-swift's load_dataset",
            file=sys.stderr,
        )
    if columns:
        opts.columns = None  # ms-swift's loader already renamed them
    return scratch


def cmd_prepare_gsm8k(opts) -> int:
    from .gsm8k import prepare

    counts = prepare(opts.input, opts.output)
    if opts.json:
        print(json.dumps(counts, indent=2))
    else:
        print(
            f'prepare-gsm8k: {counts["input_rows"]} rows -> {counts["kept"]} kept ({counts["output"]}), '
            f'{counts["malformed"]} malformed ({counts["rejects"]})'
        )
    return 0


def _run_with_progress(fn, path: Path, quiet: bool, **kw):
    from .formats import count_hint, detect_format
    from .pipeline import progress_bar

    total = count_hint(path, detect_format(path)) if path.exists() else None
    bar = progress_bar(total, quiet)
    with bar as prog:
        if prog is None:
            return fn(progress=None, **kw)
        task = prog.add_task('measuring', total=total)

        def update(value):
            if total:
                prog.update(task, completed=value)
            else:
                prog.advance(task, value)

        return fn(progress=update, **kw)


def cmd_filter(opts) -> int:
    if opts.keep_pass_rate or opts.completions:
        from .passrate_cli import cmd_filter_pass_rate

        return cmd_filter_pass_rate(opts)
    if opts.max_length is None:
        print(
            'error: grpo-data filter needs --max-length N (a length filter) or --completions LOG --keep-pass-rate '
            'LOW:HIGH (a pass-rate filter)',
            file=sys.stderr,
        )
        return 2
    from .pipeline import parse_columns, run_filter
    from .tokenize import ChatTokenizer

    tok = ChatTokenizer(opts.tokenizer)
    s = _run_with_progress(
        run_filter,
        opts.input,
        opts.quiet,
        input_path=opts.input,
        output=opts.output,
        tok=tok,
        max_length=opts.max_length,
        mode=opts.mode,
        columns=parse_columns(opts.columns),
        system=opts.system,
        rejects=opts.rejects,
        chunk_rows=opts.chunk_rows,
    )
    s.input = opts.input_label
    if opts.json:
        print(json.dumps(s.to_dict(), indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    con = Console()
    con.print(f'[bold]grpo-data filter[/]: keep rows whose {s.mode} length ≤ {s.max_length} tokens')
    t = Table()
    t.add_column('rows')
    t.add_column('count', justify='right')
    t.add_column('written to')
    t.add_row('input', f'{s.input_rows:,}', s.input)
    t.add_row('kept', f'{s.kept:,}', s.output)
    t.add_row('rejected (too long)', f'{s.rejected:,}', s.rejects)
    t.add_row('malformed', f'{s.malformed:,}', s.rejects)
    con.print(t)
    assert s.kept + s.rejected + s.malformed == s.input_rows
    return 0


def cmd_stats(opts) -> int:
    from .pipeline import parse_columns, plot_histogram, run_stats
    from .tokenize import ChatTokenizer

    tok = ChatTokenizer(opts.tokenizer)
    st, lengths = _run_with_progress(
        run_stats,
        opts.input,
        opts.quiet,
        input_path=opts.input,
        tok=tok,
        mode=opts.mode,
        columns=parse_columns(opts.columns),
        system=opts.system,
        coverage=opts.coverage,
        max_completion_length=opts.max_completion_length,
        chunk_rows=opts.chunk_rows,
    )
    st.input = opts.input_label
    if opts.plot:
        plot_histogram(lengths, st, opts.plot)
    rates = None
    if opts.completions:
        from .passrate_cli import completion_rates

        rates = completion_rates(opts, tok)
    if opts.json:
        out = st.to_dict()
        if rates is not None:
            out['completions'] = rates.to_dict()
        if opts.plot:
            out['plot'] = str(opts.plot)
        print(json.dumps(out, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    con = Console()
    con.print(f'[bold]grpo-data stats[/] {st.input}: {st.mode} length in tokens ({st.tokenizer})')
    t = Table()
    for col in ('rows', 'mean', *st.percentiles.keys(), 'max'):
        t.add_column(col, justify='right')
    t.add_row(f'{st.count:,}', f'{st.mean:.1f}', *(str(v) for v in st.percentiles.values()), str(st.max))
    con.print(t)
    if st.malformed:
        con.print(f'{st.malformed} malformed row(s) not measured (grpo-data filter lists them in its rejects file)')
    con.print(f'max_length: {st.max_length_for_coverage}   keeps {kept_text(st.kept, st.count)}')
    if st.vllm_max_model_len is not None:
        con.print(
            f'vllm_max_model_len: {st.vllm_max_model_len}   = max_length {st.max_length_for_coverage} + '
            f'max_completion_length {st.max_completion_length}'
        )
    if opts.plot:
        con.print(f'histogram: {opts.plot}')
    if rates is not None:
        from .passrate_cli import print_rates

        print_rates(con, rates)
    return 0


def kept_text(kept: int, total: int) -> str:
    """'all N rows' when none is dropped; otherwise the share rounded down, so a dropped row never reads 100%."""
    if kept >= total:
        return f'all {total:,} rows (100%)'
    share = math.floor(kept * 1000 / total) / 10  # tenths of a percent, rounded down
    return f'{kept:,} of {total:,} rows ({share:.1f}%)'


def main(argv: list[str] | None = None) -> int:
    opts = parse_command(build_parser(), argv)
    if isinstance(opts, int):
        return opts
    import tempfile

    from .formats import InputError
    from .tokenize import TokenizerError

    try:
        with tempfile.TemporaryDirectory(prefix='grpo-data-') as tmp, pipe_safe_stdout():  # `| head`: same status
            opts.input = resolve_input(opts, Path(tmp) / 'dataset.jsonl')
            if opts.cmd == 'prepare-gsm8k':
                return cmd_prepare_gsm8k(opts)
            return cmd_filter(opts) if opts.cmd == 'filter' else cmd_stats(opts)
    except (InputError, TokenizerError) as e:
        print(f'error: {e}', file=sys.stderr)
        return getattr(e, 'exit_code', 1)
    except KeyboardInterrupt:
        print('error: interrupted; no output was written', file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:
        print(f'error: {e.filename or ""}: {e.strerror}', file=sys.stderr)
        from .filemode import reading_input

        return 2 if reading_input(e, opts) else 1


if __name__ == '__main__':
    sys.exit(main())
