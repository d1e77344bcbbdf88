"""Turn one dataset row into chat messages the way ms-swift's preprocessors do.

ms-swift 4.6 (``swift/dataset/preprocessor/core.py``, docs Custom-dataset.md §PPO/GRPO):
- ``messages`` (optionally with a system turn) is used as is; in prompt mode a final assistant turn is
  dropped (GRPO generates it);
- otherwise the query comes from the first of ``query, prompt, input, instruction, question, problem``,
  the response from ``response, answer, output, targets, target, answer_key, answers, solution, text,
  completion, content``, and the system from ``system, system_prompt``;
- ``--columns '{"old": "new"}'`` renames columns first (ms-swift's ``columns`` argument).
"""

from __future__ import annotations

from typing import Any

QUERY_KEYS = ('query', 'prompt', 'input', 'instruction', 'question', 'problem')
RESPONSE_KEYS = (
    'response',
    'answer',
    'output',
    'targets',
    'target',
    'answer_key',
    'answers',
    'solution',
    'text',
    'completion',
    'content',
)
SYSTEM_KEYS = ('system', 'system_prompt')


class RowError(ValueError):
    """A row that cannot be read as a conversation (goes to the rejects file as malformed)."""


class NoPromptColumn(RowError):
    """No recognisable prompt column at all: a dataset-level problem with a --columns fix."""


def _text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    raise RowError(f'{where} must be a string, got {type(value).__name__}')


def to_messages(
    row: Any, columns: dict[str, str] | None = None, system: str | None = None, mode: str = 'prompt'
) -> list[dict[str, str]]:
    """Messages to measure. ``mode='prompt'``: up to the last user turn; ``'full'``: with the answer."""
    if not isinstance(row, dict):
        raise RowError(f'row is a JSON {type(row).__name__}, not an object')
    if columns:
        row = {columns.get(k, k): v for k, v in row.items()}
    if 'messages' in row:
        msgs = row['messages']
        if not isinstance(msgs, list) or not msgs:
            raise RowError('`messages` must be a non-empty list of {"role", "content"} objects')
        out = []
        for i, m in enumerate(msgs):
            if not isinstance(m, dict) or 'role' not in m:
                raise RowError(f'messages[{i}] must be an object with "role" and "content"')
            role = _text(m['role'], f'messages[{i}].role')
            content = m.get('content')
            content = '' if content is None else _text(content, f'messages[{i}].content')
            out.append({'role': role, 'content': content})
        if mode == 'prompt' and out[-1]['role'] == 'assistant':
            out = out[:-1]
        if not out:
            raise RowError('`messages` holds only an assistant turn')
    else:
        qkey = next((k for k in QUERY_KEYS if k in row), None)
        if qkey is None:
            raise NoPromptColumn(
                f'no prompt column: found {", ".join(map(str, row)) or "no columns"}; expected '
                f'`messages` or one of {", ".join(QUERY_KEYS)}'
            )
        out = [{'role': 'user', 'content': _text(row[qkey], f'column {qkey!r}')}]
        if mode == 'full':
            rkey = next((k for k in RESPONSE_KEYS if k in row and k != qkey), None)
            if rkey is not None and row[rkey] is not None:
                out.append({'role': 'assistant', 'content': _text(row[rkey], f'column {rkey!r}')})
        sys_key = next((k for k in SYSTEM_KEYS if k in row and row[k] is not None), None)
        if sys_key is not None:
            out.insert(0, {'role': 'system', 'content': _text(row[sys_key], f'column {sys_key!r}')})
    if system is not None and out[0]['role'] != 'system':
        out.insert(0, {'role': 'system', 'content': system})
    return out
