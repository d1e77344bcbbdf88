"""Per-prompt pass rates from ms-swift's ``completions.jsonl``, and the rows whose pass rate lies in a range.

The log: with ``log_completions true`` ms-swift 4.6's GRPO trainer appends one JSON object per ``log`` call to
``<output_dir>/completions.jsonl`` (rlhf_trainers/grpo_trainer.py ``log``; ``JsonlWriter``). Each object is a table
of equal-length lists: ``step``, ``prompt`` (the prompt as the template renders it: ``template.encode`` of the
messages, then ``safe_decode``, default system turn and generation prompt included), ``completion``, one list per
reward function (named by the reward's class, e.g. ``MathAccuracy`` for ``accuracy``), ``advantages``, and extras
such as ``solution``.
The lists hold the latest generation batch only (deques of maxlen ``generation_batch_size``): a rollout reaches
the log only when a log call follows it, so ``logging_steps 1`` records every rollout. The completions of one
prompt in one rollout (``num_generations`` of them) are that prompt's group.

Caveats the report states: with ``dynamic_sample true`` the log holds the groups kept after resampling (mostly
those with reward variance), so pass rates must come from a run without it; an eval log call writes eval rollouts
into the same file, under the step of the training table just before it (the eval log call follows the training
one at that step), so a table whose step was already logged is not read; an eval at a step with no training log
would be read, and its prompts, if not training rows, are counted as unmatched.

Matching a logged prompt to a data row: each row is rendered with the tokenizer's chat template the way
tokenize.py measures it (with the template's default system turn, and without one, with the generation prompt and
without it); a logged prompt equal to one of these texts is that row. A prompt that matches none (another
template, such as ms-swift's own for a model whose Jinja template differs) falls back to the row whose last user
message the logged prompt contains (the longest such message wins).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .formats import Atomic, InputError, default_rejects_path, detect_format, read_chunks
from .rows import RowError, to_messages

SUCCESS_THRESHOLD = 0.5  # a 0/1 reward such as ms-swift's `accuracy` (swift/rewards/orm.py) counts as a pass above it
HISTOGRAM_EDGES = (0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0)


@dataclass
class PromptRecord:
    """The completions logged for one prompt text, over every step."""

    completions: int = 0
    passes: int = 0
    groups: int = 0
    zero_variance_groups: int = 0

    @property
    def pass_rate(self) -> float:
        return self.passes / self.completions if self.completions else 0.0


@dataclass
class CompletionLog:
    path: str
    reward: str
    prompts: dict[str, PromptRecord] = field(default_factory=dict)
    tables: int = 0
    repeated_step_tables: int = 0
    completions: int = 0


# reward_funcs names -> the column ms-swift logs: the reward function's class name (swift/rewards/orm.py `orms`,
# e.g. 'accuracy': MathAccuracy; the table's keys are `self.reward_func_names`, the functions' __name__)
REWARD_COLUMNS = {
    'accuracy': 'MathAccuracy',
    'format': 'Format',
    'react_format': 'ReActFormat',
    'cosine': 'CosineReward',
    'repetition': 'RepetitionPenalty',
    'soft_overlong': 'SoftOverlong',
}


def _reward_column(table: dict, wanted: str | None, path: Path, lineno: int) -> tuple[str, list[str]]:
    known = {'step', 'prompt', 'completion', 'advantages', 'solution', 'num_turns', 'entropy', 'image'}
    rewards = [
        k
        for k, v in table.items()
        if k not in known and isinstance(v, list) and all(isinstance(x, (int, float)) or x is None for x in v)
    ]
    if wanted:
        for name in (wanted, REWARD_COLUMNS.get(wanted)):
            if name in rewards:
                return name, rewards
        raise InputError(
            f'{path} line {lineno}: no reward column {wanted!r} (reward columns: '
            f'{", ".join(rewards) or "none"}); pass --reward with one of them'
        )
    if 'MathAccuracy' in rewards:
        return 'MathAccuracy', rewards
    if len(rewards) == 1:
        return rewards[0], rewards
    raise InputError(
        f'{path} line {lineno}: reward columns {", ".join(rewards) or "none"}: name the one that '
        f'says pass/fail with --reward'
    )


def read_completions(path: Path, reward: str | None = None) -> CompletionLog:
    """Group the logged completions by prompt (per table: one rollout), count passes and all-equal groups."""
    path = Path(path)
    if not path.is_file():
        raise InputError(
            f"--completions {path}: no such file (ms-swift writes completions.jsonl into the run's "
            f'output dir when log_completions is true)'
        )
    log = CompletionLog(str(path), reward or '')
    steps: set[str] = set()
    with open(path, encoding='utf-8') as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                table = json.loads(line)
                prompts, completions = table['prompt'], table['completion']
                step = str(table['step'][0]) if table.get('step') else None
            except (ValueError, KeyError, TypeError, IndexError) as e:
                raise InputError(f'{path} line {lineno}: not an ms-swift completions.jsonl table ({e})') from None
            if step is not None and step in steps:
                log.repeated_step_tables += 1  # an eval log call at a step already logged: not a training rollout
                continue
            if step is not None:
                steps.add(step)
            name, rewards = _reward_column(table, reward, path, lineno)
            log.reward = name
            scores = table[name]
            totals = [sum(float(table[r][i] or 0.0) for r in rewards) for i in range(len(prompts))]
            if not (len(prompts) == len(completions) == len(scores)):
                raise InputError(f'{path} line {lineno}: columns of different lengths')
            log.tables += 1
            groups: dict[str, list[int]] = {}
            for i, p in enumerate(prompts):
                groups.setdefault(p, []).append(i)
            for p, idx in groups.items():
                rec = log.prompts.setdefault(p, PromptRecord())
                rec.groups += 1
                rec.completions += len(idx)
                rec.passes += sum(1 for i in idx if float(scores[i] or 0.0) > SUCCESS_THRESHOLD)
                if len(idx) > 1 and len({totals[i] for i in idx}) == 1:
                    rec.zero_variance_groups += 1
                log.completions += len(idx)
    if log.tables == 0:
        raise InputError(f'{path}: no logged completions')
    return log


def _last_user(messages: list[dict]) -> str | None:
    for m in reversed(messages):
        if m.get('role') == 'user' and isinstance(m.get('content'), str):
            return m['content']
    return None


class PromptMatcher:
    """Logged prompt text -> row index, by the rendered chat template or, failing that, the last user message."""

    def __init__(self, tok, system: str | None = None):
        self.tok = tok
        self.system = system
        self.exact: dict[str, int] = {}
        self.users: dict[str, int] = {}

    def add(self, index: int, row: dict, columns: dict | None) -> bool:
        try:
            msgs = to_messages(row, columns, self.system, 'prompt')
        except RowError:
            return False
        bare = [m for m in msgs if m.get('role') != 'system']
        for variant in {'with': msgs, 'bare': bare}.values():
            for gen in (True, False):
                try:
                    self.exact.setdefault(self.tok.render(variant, gen), index)
                except Exception:  # the model's own template may refuse a variant (e.g. no system turn)
                    pass
        user = _last_user(msgs)
        if user:
            self.users.setdefault(user, index)
        return True

    def match(self, prompt: str) -> int | None:
        hit = self.exact.get(prompt)
        if hit is not None:
            return hit
        best = None
        for user, index in self.users.items():
            if user in prompt and (best is None or len(user) > len(best[0])):
                best = (user, index)
        return best[1] if best else None


@dataclass
class PassRates:
    """Pass rates of a dataset's rows from a completions log."""

    log: CompletionLog
    rows: int = 0
    rates: dict[int, float] = field(default_factory=dict)  # row index -> pass rate
    groups: int = 0
    zero_variance_groups: int = 0
    matched_prompts: int = 0
    unmatched_prompts: int = 0
    unmatched_completions: int = 0

    @property
    def unseen_rows(self) -> int:
        return self.rows - len(self.rates)

    def histogram(self) -> list[dict]:
        edges = HISTOGRAM_EDGES
        out = []
        values = list(self.rates.values())
        for i, (lo, hi) in enumerate(zip(edges, edges[1:])):
            last = i == len(edges) - 2
            n = sum(1 for v in values if lo <= v < hi or (last and v == hi))
            out.append({'low': lo, 'high': hi, 'rows': n})
        return out

    def to_dict(self) -> dict:
        n = len(self.rates)
        return {
            'completions_log': self.log.path,
            'reward': self.log.reward,
            'success_threshold': SUCCESS_THRESHOLD,
            'logged_tables': self.log.tables,
            'repeated_step_tables_skipped': self.log.repeated_step_tables,
            'rows': self.rows,
            'rows_seen': n,
            'rows_unseen': self.unseen_rows,
            'unmatched_prompts': self.unmatched_prompts,
            'unmatched_completions': self.unmatched_completions,
            'groups': self.groups,
            'zero_variance_groups': self.zero_variance_groups,
            'zero_variance_share': (self.zero_variance_groups / self.groups) if self.groups else None,
            'mean_pass_rate': (sum(self.rates.values()) / n) if n else None,
            'pass_rate_histogram': self.histogram(),
            # what grpo-guard check --data-stats reads for its learning-signal estimate (rules/signal.py)
            'pass_rates': sorted(round(v, 6) for v in self.rates.values()),
        }


def _rows(path: Path):
    """(index, record) for every row of a local dataset file, in order."""
    fmt = detect_format(path)
    i = 0
    for records, _ in read_chunks(path, fmt, 2048):
        for rec in records:
            yield i, rec
            i += 1


def pass_rates(
    data: Path, log: CompletionLog, tok, columns: dict | None = None, system: str | None = None
) -> PassRates:
    matcher = PromptMatcher(tok, system)
    out = PassRates(log)
    for i, rec in _rows(data):
        out.rows += 1
        if rec.error is None:
            matcher.add(i, rec.row, columns)
    per_row: dict[int, list[int]] = {}
    for prompt, r in log.prompts.items():
        idx = matcher.match(prompt)
        if idx is None:
            out.unmatched_prompts += 1
            out.unmatched_completions += r.completions
            continue
        out.matched_prompts += 1
        acc = per_row.setdefault(idx, [0, 0])
        acc[0] += r.passes
        acc[1] += r.completions
        out.groups += r.groups
        out.zero_variance_groups += r.zero_variance_groups
    out.rates = {i: p / n for i, (p, n) in per_row.items() if n}
    return out


def parse_range(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in text.split(':'))
    except ValueError:
        raise InputError(f'--keep-pass-rate {text!r}: write LOW:HIGH, e.g. 0.05:0.95') from None
    if not 0.0 <= lo <= hi <= 1.0:
        raise InputError(f'--keep-pass-rate {text!r}: need 0 <= LOW <= HIGH <= 1')
    return lo, hi


@dataclass
class PassRateFilterSummary:
    input: str
    output: str
    rejects: str
    keep: tuple[float, float]
    input_rows: int = 0
    kept: int = 0
    kept_unseen: int = 0
    rejected: int = 0
    malformed: int = 0
    stats: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            'input': self.input,
            'output': self.output,
            'rejects': self.rejects,
            'keep_pass_rate': list(self.keep),
            'input_rows': self.input_rows,
            'kept': self.kept,
            'kept_unseen': self.kept_unseen,
            'rejected_pass_rate': self.rejected,
            'malformed': self.malformed,
            'completions': {k: v for k, v in self.stats.items() if k != 'pass_rates'},
        }


def filter_by_pass_rate(
    data: Path, output: Path, rates: PassRates, keep: tuple[float, float], rejects: Path | None = None
) -> PassRateFilterSummary:
    """Keep rows whose pass rate lies in [LOW, HIGH] and rows the log never saw; the others go to the rejects
    file with their pass rate. JSON-lines input (what grpo-data prepare-gsm8k writes); rows written back byte for
    byte."""
    if detect_format(data) != 'jsonl':
        raise InputError(
            f'{data}: --keep-pass-rate reads JSON-lines data (what grpo-data prepare-gsm8k and filter write)'
        )
    rejects = rejects or default_rejects_path(output)
    lo, hi = keep
    s = PassRateFilterSummary(str(data), str(output), str(rejects), keep, stats=rates.to_dict())
    out, rej = Atomic(output), Atomic(rejects)
    try:
        with open(out.tmp, 'wb') as fo, open(rej.tmp, 'w', encoding='utf-8') as fr:
            for i, rec in _rows(data):
                s.input_rows += 1
                raw = rec.raw.decode('utf-8', errors='replace').rstrip('\r\n')
                if rec.error is not None:
                    s.malformed += 1
                    fr.write(
                        json.dumps(
                            {'line': rec.line, 'reason': 'malformed', 'error': rec.error, 'raw': raw},
                            ensure_ascii=False,
                        )
                        + '\n'
                    )
                    continue
                rate = rates.rates.get(i)
                if rate is None or lo <= rate <= hi:
                    s.kept += 1
                    s.kept_unseen += rate is None
                    fo.write(rec.raw)
                else:
                    s.rejected += 1
                    fr.write(
                        json.dumps(
                            {
                                'line': rec.line,
                                'reason': 'pass_rate',
                                'pass_rate': round(rate, 6),
                                'keep': [lo, hi],
                                'raw': raw,
                            },
                            ensure_ascii=False,
                        )
                        + '\n'
                    )
        out.commit()
        rej.commit()
    except BaseException:
        out.discard()
        rej.discard()
        raise
    assert s.kept + s.rejected + s.malformed == s.input_rows
    return s
