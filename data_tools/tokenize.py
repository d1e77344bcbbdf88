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
    pass


def _find_tokenizer_dir(spec: str) -> Path:
    p = Path(spec).expanduser()
    if p.is_dir():
        return p
    if '/' in spec and not p.exists():
        hf_home = Path(os.environ.get('HF_HOME', Path.home() / '.cache' / 'huggingface'))
        snaps = hf_home / 'hub' / ('models--' + spec.replace('/', '--')) / 'snapshots'
        if snaps.is_dir():
            for snap in sorted(snaps.iterdir(), reverse=True):
                if (snap / 'tokenizer.json').is_file() or (snap / 'tokenizer_config.json').is_file():
                    return snap
        ms = Path(os.environ.get('MODELSCOPE_CACHE', Path.home() / '.cache' / 'modelscope'))
        for cand in (ms / 'models' / spec, ms / 'hub' / 'models' / spec, ms / 'hub' / spec):
            if cand.is_dir():
                return cand
        raise TokenizerError(f'--tokenizer {spec}: not a local dir and not in the local Hugging Face/ModelScope '
                             f'cache (model hubs are not reachable from here); pass a local tokenizer dir')
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
            raise TokenizerError(f'{self.path}: no chat template (tokenizer_config.json chat_template or '
                                 f'chat_template.jinja)')
        self.template = _compile(template)
        self.special = {k: _token_text(self.config.get(k)) for k in
                        ('bos_token', 'eos_token', 'unk_token', 'pad_token')}

    def render(self, messages: list[dict], add_generation_prompt: bool) -> str:
        return self.template.render(messages=messages, add_generation_prompt=add_generation_prompt, tools=None,
                                    documents=None, **self.special)

    def count(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self.backend.encode_batch(texts, add_special_tokens=False)]


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
