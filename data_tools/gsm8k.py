"""Make GSM8K (``question``/``answer`` rows) ready for ms-swift GRPO with the ``accuracy`` reward.

Each row becomes ``{"messages": [{"role": "user", "content": <question + instruction>}], "solution": "<n>"}``.
The final answer is the text after ``#### `` (upstream regex ``#### (\\-?[0-9\\.\\,]+)``, commas
removed, per the GSM8K release); ms-swift's ``accuracy`` reward (math_verify) compares it with the
``\\boxed{}`` answer the instruction asks for. Rows without a ``####`` answer go to the rejects file;
writes are atomic, like ``grpo-data filter``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .formats import Atomic, DataError, InputError

INSTRUCTION = 'Solve the problem step by step, then give the final answer as \\boxed{N}.'
ANSWER_RE = re.compile(r'####\s*(-?[0-9.,]+)')


def final_answer(answer: str) -> str | None:
    m = ANSWER_RE.search(answer)
    return m.group(1).replace(',', '').rstrip('.') if m else None


def _question_answer(row: dict) -> tuple:
    """GSM8K's own columns, or the user/assistant turns ms-swift's loader makes of them (a hub id read by
    swift.dataset.load_dataset arrives as ``messages``)."""
    if 'question' in row or 'messages' not in row:
        return row['question'], row['answer']
    turns = {m.get('role'): m.get('content') for m in row['messages'] if isinstance(m, dict)}
    return turns['user'], turns['assistant']


def _reason(e: Exception) -> str:
    if isinstance(e, KeyError):
        return f'no {e} column'
    if isinstance(e, RecursionError):
        return 'JSON nested too deeply to read'
    if isinstance(e, TypeError):
        return 'not a JSON object with "question" and "answer"'
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def _utf8_lines(fin, src: Path):
    """The file's lines; a byte that is not UTF-8 stops the run with one line (nothing is written)."""
    count = 0
    try:
        for line in fin:
            count += 1
            yield line
    except UnicodeDecodeError:
        raise InputError(f'{src}: not valid UTF-8 after line {count}; GSM8K is JSON lines in UTF-8') from None


def prepare(src: Path, dst: Path, rejects: Path | None = None) -> dict:
    if not src.is_file():
        raise InputError(f'{src}: no such file')
    rejects = rejects or dst.with_name(dst.name.rsplit('.', 1)[0] + '.rejects.jsonl')
    out, rej = Atomic(dst), Atomic(rejects)
    first_bad = None
    counts = {'input_rows': 0, 'kept': 0, 'malformed': 0, 'output': str(dst), 'rejects': str(rejects)}
    try:
        with (
            open(src, encoding='utf-8-sig') as fin,
            open(out.tmp, 'w', encoding='utf-8') as fo,
            open(rej.tmp, 'w', encoding='utf-8') as fr,
        ):
            for lineno, line in enumerate(_utf8_lines(fin, src), start=1):
                if not line.strip():
                    continue
                counts['input_rows'] += 1
                try:
                    row = json.loads(line)
                    question, answer = _question_answer(row)
                    solution = final_answer(answer)
                    if not isinstance(question, str) or solution is None:
                        raise ValueError('no "#### <number>" final answer')
                except (ValueError, KeyError, TypeError, RecursionError) as e:
                    counts['malformed'] += 1
                    first_bad = first_bad or (lineno, _reason(e))
                    fr.write(
                        json.dumps(
                            {'line': lineno, 'reason': 'malformed', 'error': str(e), 'raw': line.rstrip('\r\n')},
                            ensure_ascii=False,
                        )
                        + '\n'
                    )
                    continue
                fo.write(
                    json.dumps(
                        {'messages': [{'role': 'user', 'content': f'{question}\n{INSTRUCTION}'}], 'solution': solution},
                        ensure_ascii=False,
                    )
                    + '\n'
                )
                counts['kept'] += 1
        if counts['input_rows'] == 0:
            raise DataError(f'{src}: no rows')
        if counts['kept'] == 0:
            line, why = first_bad
            raise DataError(
                f'{src}: none of its {counts["input_rows"]:,} rows is a GSM8K row (line {line}: {why}); '
                f'each line must be a JSON object with "question" and an "answer" ending "#### <number>"; '
                f'nothing written'
            )
        out.commit()
        rej.commit()
        return counts
    except BaseException:
        out.discard()
        rej.discard()
        raise
