"""The filter and stats pipelines: read in chunks, map rows to messages, measure, route.

Memory stays bounded: one chunk of rows is alive at a time; ``stats`` keeps only an array of lengths.
"""

from __future__ import annotations

import bisect
import json
import math
import sys
from array import array
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from .formats import (
    Atomic,
    DataError,
    InputError,
    Record,
    RejectsWriter,
    Writer,
    default_rejects_path,
    detect_format,
    read_chunks,
)
from .rows import NoPromptColumn, RowError, to_messages
from .tokenize import ChatTokenizer


@dataclass
class Measured:
    record: Record
    length: int | None = None
    error: str | None = None
    exact: bool = True
    """False: ``length`` is a lower bound already over the filter's limit (the row was not tokenized)."""


def parse_columns(text: str | None) -> dict[str, str] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f'--columns {text!r}: not JSON ({e.msg}); write e.g. --columns \'{{"answer": "solution"}}\'')
    except RecursionError:
        raise InputError(
            '--columns: JSON nested too deeply; write a flat object, e.g. --columns \'{"answer": "solution"}\''
        ) from None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise InputError(f'--columns {text!r}: must be a JSON object of old name → new name')
    return value


def measure(
    path: Path,
    tok: ChatTokenizer,
    mode: str = 'prompt',
    columns: dict | None = None,
    system: str | None = None,
    chunk_rows: int = 2048,
    progress: Callable[[int], None] | None = None,
    limit: int | None = None,
) -> Iterator[list[Measured]]:
    """Yield chunks of measured records (length, or the reason the row is malformed). With ``limit`` (the filter's),
    a row whose lower bound from its bytes already exceeds it is not tokenized: its length is that bound and
    ``exact`` False (ChatTokenizer.count_upto); every row within reach of the limit is measured exactly."""
    fmt = detect_format(path)
    seen_good = False
    add_gen = mode == 'prompt'
    for records, consumed in read_chunks(path, fmt, chunk_rows):
        out: list[Measured] = []
        texts: list[str] = []
        slots: list[Measured] = []
        for rec in records:
            m = Measured(rec)
            out.append(m)
            if rec.error:
                m.error = rec.error
                continue
            try:
                msgs = to_messages(rec.row, columns, system, mode)
            except NoPromptColumn as e:
                if not seen_good:
                    raise DataError(
                        f'{path} line {rec.line}: {e}. Map your prompt column with --columns, e.g. '
                        f'--columns \'{{"my_prompt": "query"}}\''
                    ) from None
                m.error = str(e)
                continue
            except RowError as e:
                m.error = str(e)
                continue
            seen_good = True
            try:
                texts.append(tok.render(msgs, add_gen))
            except Exception as e:  # the model's own template may raise on odd roles
                m.error = f'chat template error: {e}'
                continue
            slots.append(m)
        for m, (n, exact) in zip(slots, tok.count_upto(texts, limit)):
            m.length, m.exact = n, exact
        if progress is not None:
            progress(consumed if consumed else len(records))
        yield out


@dataclass
class FilterSummary:
    input: str
    output: str
    rejects: str
    max_length: int
    mode: str
    input_rows: int = 0
    kept: int = 0
    rejected: int = 0
    malformed: int = 0
    tokens_measured: int = 0
    rejected_unmeasured: int = 0
    """Of ``rejected``: rows over the limit on their bytes alone (not tokenized; not in tokens_measured)."""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def run_filter(
    input_path: Path,
    output: Path,
    tok: ChatTokenizer,
    max_length: int,
    mode: str = 'prompt',
    columns: dict | None = None,
    system: str | None = None,
    rejects: Path | None = None,
    chunk_rows: int = 2048,
    progress=None,
    bound: bool = True,
) -> FilterSummary:
    """Keep the rows at most ``max_length`` tokens long. ``bound`` (the default): a row whose lower bound on its
    token count (from its bytes: ChatTokenizer.lower_bound) already exceeds the limit is rejected without being
    tokenized, with ``length_at_least`` in its rejects entry; False tokenizes every row. Both keep and reject the
    same rows (tests/test_data_tools.py)."""
    if not input_path.exists():
        raise InputError(f'{input_path}: no such file or directory')
    fmt = detect_format(input_path)
    if output.resolve() == input_path.resolve():
        raise InputError(f'-o {output}: same as the input; write to a new file (the input is never modified)')
    rejects = rejects or default_rejects_path(output)
    if rejects.resolve() in (output.resolve(), input_path.resolve()):
        raise InputError(f'--rejects {rejects}: must differ from the input and the output')
    if max_length < 1:
        raise InputError(f'--max-length {max_length}: must be >= 1')
    out_atomic = Atomic(output, is_dir=(fmt == 'hf'))
    rej_atomic = None
    writer = rej = None
    summary = FilterSummary(str(input_path), str(output), str(rejects), max_length, mode)
    try:
        rej_atomic = Atomic(rejects)
        writer = Writer(fmt, out_atomic, input_path)
        rej = RejectsWriter(rej_atomic)
        limit = max_length if bound else None
        for chunk in measure(input_path, tok, mode, columns, system, chunk_rows, progress, limit):
            kept = []
            for m in chunk:
                summary.input_rows += 1
                if m.error is not None:
                    summary.malformed += 1
                    rej.write(m.record, 'malformed', error=m.error)
                elif m.length <= max_length:
                    summary.tokens_measured += m.length
                    kept.append(m.record)
                elif not m.exact:
                    summary.rejected += 1
                    summary.rejected_unmeasured += 1
                    rej.write(m.record, 'too_long', length_at_least=m.length, max_length=max_length)
                else:
                    summary.tokens_measured += m.length
                    summary.rejected += 1
                    rej.write(m.record, 'too_long', length=m.length, max_length=max_length)
            writer.write(kept)
            summary.kept += len(kept)
        if summary.input_rows == 0:
            raise DataError(f'{input_path}: no rows (the file is empty)')
        writer.close()
        rej.close()
        writer = rej = None
        out_atomic.commit()
        rej_atomic.commit()
        return summary
    except BaseException:  # KeyboardInterrupt included: leave no partial output behind
        for h in (writer, rej):
            if h is not None and getattr(h, '_fh', None) is not None:
                try:
                    h._fh.close()
                except Exception:
                    pass
        out_atomic.discard()
        if rej_atomic is not None:
            rej_atomic.discard()
        raise


PERCENTILES = (50, 90, 95, 99, 99.9)


def percentile(sorted_values, q: float) -> int:
    """Nearest-rank percentile (a value that occurs in the data)."""
    if not sorted_values:
        return 0
    k = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[k - 1]


@dataclass
class Stats:
    input: str
    mode: str
    count: int = 0
    malformed: int = 0
    mean: float = 0.0
    max: int = 0
    min: int = 0
    percentiles: dict = field(default_factory=dict)
    coverage: float = 0.99
    max_length_for_coverage: int = 0
    kept: int = 0
    """Measured rows that max_length_for_coverage keeps (ties at the boundary make it more than coverage asks)."""
    max_completion_length: int | None = None
    vllm_max_model_len: int | None = None
    tokenizer: str = ''
    histogram: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def run_stats(
    input_path: Path,
    tok: ChatTokenizer,
    mode: str = 'prompt',
    columns=None,
    system=None,
    coverage: float = 0.99,
    max_completion_length: int | None = None,
    chunk_rows: int = 2048,
    progress=None,
) -> tuple[Stats, array]:
    if not input_path.exists():
        raise InputError(f'{input_path}: no such file or directory')
    if not 0 < coverage <= 1:
        raise InputError(f'--coverage {coverage}: must be in (0, 1]')
    lengths = array('I')
    malformed = 0
    for chunk in measure(input_path, tok, mode, columns, system, chunk_rows, progress):
        for m in chunk:
            if m.error is not None:
                malformed += 1
            else:
                lengths.append(m.length)
    if not lengths:
        raise DataError(f'{input_path}: no measurable rows ({malformed} malformed)')
    srt = sorted(lengths)
    st = Stats(
        input=str(input_path),
        mode=mode,
        count=len(srt),
        malformed=malformed,
        mean=round(sum(srt) / len(srt), 2),
        max=srt[-1],
        min=srt[0],
        coverage=coverage,
        tokenizer=str(tok.path),
    )
    st.percentiles = {f'p{q:g}': percentile(srt, q) for q in PERCENTILES}
    st.max_length_for_coverage = percentile(srt, coverage * 100)
    st.kept = bisect.bisect_right(srt, st.max_length_for_coverage)
    if max_completion_length is not None:
        st.max_completion_length = max_completion_length
        st.vllm_max_model_len = st.max_length_for_coverage + max_completion_length
    edges = _bin_edges(srt[0], srt[-1])
    counts = [0] * (len(edges) - 1)
    j = 0
    for v in srt:
        while j < len(counts) - 1 and v >= edges[j + 1]:
            j += 1
        counts[j] += 1
    st.histogram = {'edges': edges, 'counts': counts}
    return st, lengths


def _bin_edges(lo: int, hi: int, bins: int = 20) -> list[int]:
    width = max(1, math.ceil((hi - lo + 1) / bins))
    return [lo + i * width for i in range(bins + 1)]


def plot_histogram(lengths, st: Stats, path: Path) -> None:
    import matplotlib

    matplotlib.use('Agg')  # no display needed; the process environment is left as it was
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    ax.hist(lengths, bins=min(100, max(10, int(math.sqrt(len(lengths))))), color='#4477aa')
    ax.axvline(
        st.max_length_for_coverage,
        color='#cc3311',
        linestyle='--',
        label=f'{st.coverage:.1%} coverage: {st.max_length_for_coverage} tokens',
    )
    ax.set_xlabel(f'{st.mode} length (tokens, chat template applied)')
    ax.set_ylabel('rows')
    ax.set_title(Path(st.input).name)
    ax.legend()
    fig.tight_layout()
    atomic = Atomic(path)
    try:
        fig.savefig(atomic.tmp, format='png', dpi=100)
        atomic.commit()
    except BaseException:
        atomic.discard()
        raise
    finally:
        plt.close(fig)


def progress_bar(total: int | None, quiet: bool):
    """A rich progress bar on stderr when it is a TTY (else a no-op)."""
    if quiet or not sys.stderr.isatty():
        return nullcontext(None)
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    cols = [
        TextColumn('measuring'),
        BarColumn(),
        DownloadColumn() if total else TextColumn('{task.completed} rows'),
        TimeRemainingColumn(),
    ]
    return Progress(*cols, console=Console(stderr=True), transient=True)
