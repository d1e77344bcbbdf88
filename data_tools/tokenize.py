"""Measure token lengths exactly as the model sees them, fast.

The chat template is rendered with Jinja2 in the same sandboxed environment transformers uses for
``apply_chat_template`` (trim_blocks, lstrip_blocks, loopcontrols, ``tojson``, ``raise_exception``),
and the text is encoded in batches by the Rust ``tokenizers`` library with
``add_special_tokens=False`` (what ``apply_chat_template(tokenize=True)`` does). This avoids importing
transformers and torch (6 s and 450 MB here). tests/test_data_tools.py checks the lengths token for token
against transformers' ``apply_chat_template`` and ms-swift's own template encoder.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

BUNDLED_TOKENIZER = Path(__file__).resolve().parent / 'tokenizer'


class TokenizerError(ValueError):
    """The tokenizer cannot be loaded (unreadable input): exit 2."""

    exit_code = 2


def _find_tokenizer_dir(spec: str) -> Path:
    p = Path(spec).expanduser()
    if p.is_dir():
        return p
    if '/' in spec and not p.exists():
        from grpo_recipes.models import cached_snapshot

        found = cached_snapshot(spec, needed=('tokenizer.json', 'tokenizer_config.json'))
        if found is not None:
            return found
        raise TokenizerError(
            f'--tokenizer {spec}: not a local dir and not in the local Hugging Face/ModelScope '
            f'cache (model hubs are not reachable from here); pass a local tokenizer dir'
        )
    raise TokenizerError(f'--tokenizer {spec}: no such directory')


class ChatTokenizer:
    """Chat template + Rust tokenizer of one model dir."""

    def __init__(self, spec: str | os.PathLike | None = None):
        self.path = _find_tokenizer_dir(str(spec)) if spec else BUNDLED_TOKENIZER
        tok_file = self.path / 'tokenizer.json'
        if not tok_file.is_file():
            raise TokenizerError(f'{self.path}: no tokenizer.json (a fast tokenizer is required)')
        from tokenizers import Tokenizer

        try:
            self.backend = Tokenizer.from_file(str(tok_file))
        except Exception as e:  # tokenizers raises a bare Exception on bad files
            raise TokenizerError(f'{tok_file}: cannot load ({e})') from None
        cfg_file = self.path / 'tokenizer_config.json'
        try:
            self.config = json.loads(cfg_file.read_text(encoding='utf-8')) if cfg_file.is_file() else {}
        except (OSError, ValueError) as e:
            raise TokenizerError(f'{cfg_file}: cannot read ({e})') from None
        template = self.config.get('chat_template')
        jinja_file = self.path / 'chat_template.jinja'
        if jinja_file.is_file():
            template = jinja_file.read_text(encoding='utf-8')
        if isinstance(template, list):  # named templates: use "default"
            template = next((t['template'] for t in template if t.get('name') == 'default'), None)
        if not template:
            raise TokenizerError(
                f'{self.path}: no chat template (tokenizer_config.json chat_template or chat_template.jinja)'
            )
        self.template = _compile(template)
        self.special = {
            k: _token_text(self.config.get(k)) for k in ('bos_token', 'eos_token', 'unk_token', 'pad_token')
        }
        self.max_token_bytes: int | None = None
        """The most bytes one token spells, where :meth:`lower_bound` holds for this tokenizer (else None)."""
        self._split, self._known = self._segmenter(tok_file)

    def render(self, messages: list[dict], add_generation_prompt: bool) -> str:
        return self.template.render(
            messages=messages, add_generation_prompt=add_generation_prompt, tools=None, documents=None, **self.special
        )

    def count(self, texts: list[str]) -> list[int]:
        """Token counts of ``texts`` (no BOS/EOS added, as apply_chat_template does).

        The Rust tokenizer cuts the text at special added tokens before anything else and encodes
        the pieces in between independently. So when every special token is a plain one (no lstrip,
        rstrip, single_word or normalized), the count is the number of special tokens plus the counts of the
        pieces, and the pieces the chat template itself writes (``system\nYou are Qwen...``,
        ``assistant\n``) are counted once instead of once per row. Otherwise whole texts are encoded.
        """
        return [n for n, _ in self.count_upto(texts, None)]

    def count_upto(self, texts: list[str], limit: int | None) -> list[tuple[int, bool]]:
        """``(count, exact)`` per text: the exact token count (``exact`` True), or, for a text whose lower bound
        (:meth:`lower_bound`) already exceeds ``limit``, that bound (``exact`` False) without encoding the text. A
        text whose bound is at most ``limit`` is always encoded, so every count at or under ``limit`` is exact."""
        if self._split is None:
            return [(len(e), True) for e in self.backend.encode_batch(texts, add_special_tokens=False)]
        known = self._known
        totals = []
        todo: list[str] = []
        owners: list[int] = []
        for i, text in enumerate(texts):
            parts = self._split(text)
            n = len(parts) // 2  # the special tokens (odd positions)
            k = self.max_token_bytes
            if limit is not None and k is not None and 4 * len(text) > limit * k:  # else the bound cannot exceed it
                bound = self._lower_bound(parts)
                if bound is not None and bound > limit:
                    totals.append((bound, False))
                    continue
            for piece in parts[::2]:
                if not piece:
                    continue
                c = known.get(piece)
                if c is None:
                    todo.append(piece)
                    owners.append(i)
                else:
                    n += c
            totals.append((n, True))
        for i, enc in zip(owners, self.backend.encode_batch(todo, add_special_tokens=False)):
            totals[i] = (totals[i][0] + len(enc), True)
        return totals

    def lower_bound(self, text: str) -> int | None:
        """A lower bound on ``text``'s token count that reads only its bytes, or None where this tokenizer gives none.

        A byte-level BPE (GPT-2's ByteLevel pre-tokenizer: one vocabulary symbol per byte) turns every byte of the
        normalized text into part of exactly one token, and no token spells more than ``max_token_bytes`` bytes (the
        longest vocabulary entry or added token), so a piece of B bytes needs at least ceil(B / max_token_bytes)
        tokens. It holds where nothing drops or absorbs bytes without a token: the pre-tokenizers only split (Split,
        Digits, Punctuation, ByteLevel; no Removed behaviour, no Whitespace), no added token strips the spaces beside
        it, no truncation; and the normalizer is none or NFC on a text it leaves unchanged (a substring of an NFC
        string is NFC, so each stretch the tokenizer normalizes between added tokens is unchanged too)."""
        return self._lower_bound(self._split(text)) if self._split is not None else None

    def _lower_bound(self, parts: list[str]) -> int | None:
        k = self.max_token_bytes
        if k is None:
            return None
        pieces = [p for p in parts[::2] if p]
        norm = self.backend.normalizer
        if norm is not None and any(norm.normalize_str(p) != p for p in pieces):
            return None
        return len(parts) // 2 + -(-sum(len(p.encode('utf-8')) for p in pieces) // k)

    def _segmenter(self, tok_file: Path):
        """A splitter on special tokens, and the counts of the template's constant pieces."""
        import re

        try:
            spec = json.loads(tok_file.read_text(encoding='utf-8'))
        except ValueError:
            return None, {}
        added = spec.get('added_tokens') or []
        self.max_token_bytes = _max_token_bytes(spec)
        special = [t for t in added if t.get('special')]
        if not special or any(
            t.get('lstrip') or t.get('rstrip') or t.get('single_word') or t.get('normalized') for t in special
        ):
            return None, {}
        alternatives = sorted((t['content'] for t in special), key=len, reverse=True)
        splitter = re.compile('(' + '|'.join(re.escape(a) for a in alternatives) + ')').split
        known: dict[str, int] = {}
        probe = '\x00grpo-data-probe\x00'
        for msgs, gen in (
            ([{'role': 'user', 'content': probe}], True),
            ([{'role': 'user', 'content': probe}, {'role': 'assistant', 'content': probe}], False),
        ):
            try:
                text = self.render(msgs, gen)
            except Exception:
                continue
            for piece in splitter(text)[::2]:
                if piece and probe not in piece:
                    known[piece] = len(self.backend.encode(piece, add_special_tokens=False))
        return splitter, known


# Pre-tokenizers that only cut the text (every byte stays in some pre-token), and the behaviours of a cut that keep
# the matched text (tokenizers' SplitDelimiterBehavior; "removed" drops it).
_KEEPING_PRETOKENIZERS = {'ByteLevel', 'Split', 'Digits', 'Punctuation'}
_KEEPING_BEHAVIOURS = {'isolated', 'mergedwithprevious', 'mergedwithnext', 'contiguous'}


def _max_token_bytes(spec: dict) -> int | None:
    """The most bytes a token of this tokenizer.json spells, where every byte of a text ends up in exactly one token
    (a byte-level BPE whose steps drop or absorb nothing: :meth:`ChatTokenizer.lower_bound`), else None."""
    model = spec.get('model') or {}
    pre = spec.get('pre_tokenizer') or {}
    steps = pre.get('pretokenizers') if pre.get('type') == 'Sequence' else [pre]
    norm = spec.get('normalizer')
    if (
        model.get('type') != 'BPE'
        or not isinstance(model.get('vocab'), dict)
        or not model['vocab']
        or not isinstance(steps, list)
        or not any(isinstance(p, dict) and p.get('type') == 'ByteLevel' for p in steps)
        or any(not isinstance(p, dict) or p.get('type') not in _KEEPING_PRETOKENIZERS for p in steps)
        or any(str(p.get('behavior', 'isolated')).lower() not in _KEEPING_BEHAVIOURS for p in steps)
        or (norm is not None and norm.get('type') != 'NFC')
        or spec.get('truncation') is not None
    ):
        return None
    added = spec.get('added_tokens') or []
    if any(t.get('lstrip') or t.get('rstrip') for t in added):
        return None
    vocab = model['vocab']
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = set(ByteLevel.alphabet())  # one symbol per byte
    if set(''.join(vocab)) <= alphabet:
        longest = max(map(len, vocab))
    else:  # an entry with other characters: those count their UTF-8 bytes
        longest = max(sum(1 if c in alphabet else len(c.encode('utf-8')) for c in t) for t in vocab)
    import unicodedata

    contents = [str(t.get('content', '')) for t in added]
    if norm is not None:  # an added token matched after normalization spells its normalized text
        contents += [unicodedata.normalize('NFC', c) for c in contents]
    return max([longest, *(len(c.encode('utf-8')) for c in contents)])


def _token_text(v):
    if isinstance(v, dict):
        return v.get('content')
    return v


def _compile(source: str):
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters['tojson'] = tojson
    env.globals['raise_exception'] = raise_exception
    env.globals['strftime_now'] = strftime_now
    return env.from_string(source)
