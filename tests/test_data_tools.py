"""grpo-data: exact lengths, every input format and row format, nothing lost on bad input."""

import csv
import json
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, SHARED, run_cli, sigint_default

from data_tools.formats import InputError
from data_tools.pipeline import run_filter, run_stats
from data_tools.rows import to_messages
from data_tools.tokenize import ChatTokenizer

SAMPLE = ROOT / 'data_tools' / 'sample' / 'gsm8k_train_300.jsonl'
TOKENIZER_DIR = SHARED / 'data' / 'qwen2.5-tokenizer'


@pytest.fixture(scope='module')
def tok():
    return ChatTokenizer(TOKENIZER_DIR if TOKENIZER_DIR.is_dir() else None)


@pytest.fixture(scope='module')
def hf_tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(
        str(TOKENIZER_DIR if TOKENIZER_DIR.is_dir() else ROOT / 'data_tools' / 'tokenizer')
    )


def sample_rows():
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()]


def lengths_of(tmp_path, tok, path, **kw):
    st, lengths = run_stats(path, tok, **kw)
    return list(lengths)


def test_lengths_match_transformers_apply_chat_template(tmp_path, tok, hf_tok):
    rows = sample_rows()
    ours = lengths_of(tmp_path, tok, SAMPLE)
    theirs = [
        len(
            hf_tok.apply_chat_template(
                [{'role': 'user', 'content': r['question']}],
                add_generation_prompt=True,
                tokenize=True,
                return_dict=False,
            )
        )
        for r in rows
    ]
    assert ours == theirs


def test_full_mode_and_system_match_transformers(tmp_path, tok, hf_tok):
    rows = sample_rows()[:50]
    ours = lengths_of(tmp_path, tok, SAMPLE, mode='full', system='Think step by step.')[:50]
    theirs = [
        len(
            hf_tok.apply_chat_template(
                [
                    {'role': 'system', 'content': 'Think step by step.'},
                    {'role': 'user', 'content': r['question']},
                    {'role': 'assistant', 'content': r['answer']},
                ],
                add_generation_prompt=False,
                tokenize=True,
                return_dict=False,
            )
        )
        for r in rows
    ]
    assert ours == theirs


@pytest.mark.slow
def test_lengths_match_ms_swift_template_encoder(tmp_path, tok):
    """ms-swift's own template (qwen2_5) encodes the same prompts to the same number of tokens."""
    model_dir = tmp_path / 'Qwen2.5-7B-Instruct'
    model_dir.mkdir()
    for f in TOKENIZER_DIR.iterdir():
        if f.name in ('tokenizer.json', 'tokenizer_config.json', 'vocab.json', 'merges.txt'):
            (model_dir / f.name).write_bytes(f.read_bytes())
    (model_dir / 'config.json').write_text(
        (ROOT / 'grpo_recipes' / 'model_configs' / 'Qwen2.5-7B-Instruct.json').read_text()
    )
    rows = sample_rows()[:60]
    script = """
import json, sys
from swift.model import get_processor
from swift.template import get_template
proc = get_processor(sys.argv[1], model_type='qwen2')
tpl = get_template(proc, template_type='qwen2_5')
rows = json.loads(sys.stdin.read())
print(json.dumps([len(tpl.encode({'messages': [{'role': 'user', 'content': r['question']}]})['input_ids'])
                  for r in rows]))
"""
    proc = subprocess.run(
        [sys.executable, '-c', script, str(model_dir)],
        input=json.dumps(rows),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    swift_lengths = json.loads(proc.stdout.strip().splitlines()[-1])
    assert lengths_of(tmp_path, tok, SAMPLE)[:60] == swift_lengths


def test_filter_keeps_exactly_the_short_rows_byte_for_byte(tmp_path, tok, hf_tok):
    out = tmp_path / 'kept.jsonl'
    s = run_filter(SAMPLE, out, tok, max_length=100)
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    lengths = lengths_of(tmp_path, tok, SAMPLE)
    assert out.read_bytes() == b''.join(ln for ln, n in zip(lines, lengths) if n <= 100)
    rejects = [json.loads(ln) for ln in (tmp_path / 'kept.rejects.jsonl').read_text().splitlines()]
    assert [r['line'] for r in rejects] == [i + 1 for i, n in enumerate(lengths) if n > 100]
    assert all(r['reason'] == 'too_long' and r['length'] > 100 for r in rejects)
    assert (s.kept, s.rejected, s.malformed, s.input_rows) == (
        sum(n <= 100 for n in lengths),
        sum(n > 100 for n in lengths),
        0,
        300,
    )


@pytest.mark.parametrize(
    'row, expect',
    [
        (
            {
                'messages': [
                    {'role': 'system', 'content': 'S'},
                    {'role': 'user', 'content': 'Q'},
                    {'role': 'assistant', 'content': 'A'},
                ]
            },
            [('system', 'S'), ('user', 'Q')],
        ),
        ({'query': 'Q', 'response': 'A', 'system': 'S'}, [('system', 'S'), ('user', 'Q')]),
        ({'prompt': 'Q'}, [('user', 'Q')]),
        ({'problem': 'Q', 'solution': '42'}, [('user', 'Q')]),
        ({'instruction': 'Q', 'output': 'A'}, [('user', 'Q')]),
        ({'input': 'Q'}, [('user', 'Q')]),
        ({'question': 'Q', 'system_prompt': 'S'}, [('system', 'S'), ('user', 'Q')]),
    ],
)
def test_ms_swift_row_formats(row, expect):
    assert [(m['role'], m['content']) for m in to_messages(row)] == expect


def test_columns_rename_and_full_mode():
    msgs = to_messages({'my_q': 'Q', 'my_a': 'A'}, columns={'my_q': 'query', 'my_a': 'response'}, mode='full')
    assert [(m['role'], m['content']) for m in msgs] == [('user', 'Q'), ('assistant', 'A')]


ROWS = [
    {'question': 'What is 2+2?', 'answer': '#### 4', 'solution': '4'},
    {'question': 'x ' * 400, 'answer': '#### 1', 'solution': '1'},
    {'question': 'Name a prime.', 'answer': '#### 7', 'solution': '7'},
]


def write_format(tmp_path, fmt):
    if fmt == 'jsonl':
        p = tmp_path / 'd.jsonl'
        p.write_text(''.join(json.dumps(r) + '\n' for r in ROWS))
    elif fmt == 'json':
        p = tmp_path / 'd.json'
        p.write_text(json.dumps(ROWS))
    elif fmt == 'csv':
        p = tmp_path / 'd.csv'
        with open(p, 'w', newline='') as f:
            w = csv.DictWriter(f, fieldnames=list(ROWS[0]))
            w.writeheader()
            w.writerows(ROWS)
    elif fmt == 'parquet':
        import pyarrow as pa
        import pyarrow.parquet as pq

        p = tmp_path / 'd.parquet'
        pq.write_table(pa.Table.from_pylist(ROWS), p)
    else:
        import datasets

        p = tmp_path / 'hfdir'
        datasets.Dataset.from_list(ROWS).save_to_disk(str(p))
    return p


def read_format(p, fmt):
    if fmt == 'jsonl':
        return [json.loads(ln) for ln in p.read_text().splitlines()]
    if fmt == 'json':
        return json.loads(p.read_text())
    if fmt == 'csv':
        with open(p, newline='') as f:
            return list(csv.DictReader(f))
    if fmt == 'parquet':
        import pyarrow.parquet as pq

        return pq.read_table(p).to_pylist()
    import datasets

    return datasets.load_from_disk(str(p)).to_list()


@pytest.mark.parametrize('fmt', ['jsonl', 'json', 'csv', 'parquet', 'hf'])
def test_every_input_format_round_trips(tmp_path, tok, fmt):
    src = write_format(tmp_path, fmt)
    out = tmp_path / ('kept' + ('' if fmt == 'hf' else src.suffix))
    s = run_filter(src, out, tok, max_length=64, rejects=tmp_path / 'rej.jsonl')
    assert (s.input_rows, s.kept, s.rejected, s.malformed) == (3, 2, 1, 0)
    assert read_format(out, fmt) == [ROWS[0], ROWS[2]]  # extra columns such as `solution` kept untouched


def run_filter_cli(tmp_path, src, *extra):
    out = tmp_path / 'out.jsonl'
    proc = run_cli(
        'data_tools.cli',
        'filter',
        str(src),
        '-o',
        str(out),
        '--max-length',
        '64',
        '--json',
        '--quiet',
        '--tokenizer',
        str(ROOT / 'data_tools' / 'tokenizer'),
        *extra,
    )
    return proc, out


def test_malformed_rows_go_to_rejects_with_line_numbers(tmp_path):
    src = tmp_path / 'd.jsonl'
    src.write_bytes(
        b'{"question": "ok?"}\n'
        b'{"question": "broken"\n'
        b'[1, 2]\n'
        b'{"question": 5}\n'
        b'{"question": "bad \xff utf8"}\n'
        b'\n'
        b'{"question": "fine"}\r\n'
    )
    proc, out = run_filter_cli(tmp_path, src)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert (s['input_rows'], s['kept'], s['rejected'], s['malformed']) == (6, 2, 0, 4)
    assert out.read_bytes() == b'{"question": "ok?"}\n{"question": "fine"}\r\n'  # CRLF kept as read
    rej = [json.loads(ln) for ln in (tmp_path / 'out.rejects.jsonl').read_text().splitlines()]
    assert [(r['line'], r['reason']) for r in rej] == [
        (2, 'malformed'),
        (3, 'malformed'),
        (4, 'malformed'),
        (5, 'malformed'),
    ]
    assert 'invalid JSON' in rej[0]['error'] and 'not an object' in rej[1]['error']
    assert 'must be a string' in rej[2]['error'] and 'UTF-8' in rej[3]['error']


def test_bom_and_huge_line(tmp_path):
    src = tmp_path / 'd.jsonl'
    big = json.dumps({'question': 'y ' * 5_000_000})  # a 10 MB line
    src.write_bytes(b'\xef\xbb\xbf{"question": "first"}\n' + big.encode() + b'\n')
    proc, out = run_filter_cli(tmp_path, src)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert (s['kept'], s['rejected'], s['malformed']) == (1, 1, 0)
    assert out.read_bytes() == b'{"question": "first"}\n'


def test_no_prompt_column_lists_columns_and_fix(tmp_path):
    src = tmp_path / 'd.jsonl'
    src.write_text('{"foo": "x", "bar": "y"}\n')
    proc, out = run_filter_cli(tmp_path, src)
    assert proc.returncode == 1
    assert 'foo, bar' in proc.stderr and '--columns' in proc.stderr and 'line 1' in proc.stderr
    assert not out.exists() and not (tmp_path / 'out.rejects.jsonl').exists()
    assert len(proc.stderr.strip().splitlines()) == 1


def test_empty_file_is_an_error_and_writes_nothing(tmp_path):
    src = tmp_path / 'd.jsonl'
    src.write_text('')
    proc, out = run_filter_cli(tmp_path, src)
    assert proc.returncode == 1 and 'no rows' in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ['d.jsonl']


def test_unwritable_output(tmp_path):
    proc = run_cli(
        'data_tools.cli',
        'filter',
        str(SAMPLE),
        '-o',
        str(tmp_path / 'missing' / 'o.jsonl'),
        '--max-length',
        '64',
        '--quiet',
    )
    assert proc.returncode == 1 and 'cannot write' in proc.stderr and 'Traceback' not in proc.stderr


def test_missing_tokenizer_hub_id_is_one_line(tmp_path):
    proc = run_cli(
        'data_tools.cli',
        'stats',
        str(SAMPLE),
        '--tokenizer',
        'nobody/NoSuchModel',
        '--quiet',
        env={'HF_HOME': str(tmp_path), 'MODELSCOPE_CACHE': str(tmp_path)},
    )
    assert proc.returncode == 2 and 'not reachable' in proc.stderr  # unreadable input: 2 (issue 21 item 18)
    assert len(proc.stderr.strip().splitlines()) == 1


def test_sigint_leaves_no_output(tmp_path):
    src = tmp_path / 'big.jsonl'
    line = (json.dumps({'question': 'How many apples are there if ' * 20}) + '\n').encode()
    src.write_bytes(line * 300_000)
    out = tmp_path / 'out.jsonl'
    proc = subprocess.Popen(
        [sys.executable, '-m', 'data_tools.cli', 'filter', str(src), '-o', str(out), '--max-length', '4096', '--quiet'],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_default,
    )
    deadline = time.time() + 60
    while time.time() < deadline and not any(p.name.startswith('.out.jsonl') for p in tmp_path.iterdir()):
        time.sleep(0.05)
    time.sleep(0.5)
    assert proc.poll() is None, 'filter finished before it could be interrupted'
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and 'interrupted' in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ['big.jsonl']


def test_stats_coverage_and_vllm_len(tmp_path, tok):
    st, lengths = run_stats(SAMPLE, tok, coverage=0.95, max_completion_length=1024)
    srt = sorted(lengths)
    assert sum(n <= st.max_length_for_coverage for n in srt) >= 0.95 * len(srt)
    assert sum(n <= st.max_length_for_coverage - 1 for n in srt) < 0.95 * len(srt)
    assert st.vllm_max_model_len == st.max_length_for_coverage + 1024
    assert st.max == srt[-1] and st.count == 300


def test_stats_cli_json_and_plot(tmp_path):
    png = tmp_path / 'h.png'
    proc = run_cli(
        'data_tools.cli',
        'stats',
        str(SAMPLE),
        '--json',
        '--plot',
        str(png),
        '--quiet',
        env={'MPLCONFIGDIR': str(tmp_path / 'mpl')},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out['count'] == 300 and set(out['percentiles']) == {'p50', 'p90', 'p95', 'p99', 'p99.9'}
    assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_same_output_as_input_refused(tmp_path, tok):
    src = write_format(tmp_path, 'jsonl')
    with pytest.raises(InputError, match='same as the input'):
        run_filter(src, src, tok, max_length=10)


# Pieces that make a row's bytes close to its token count (a run of 128 spaces is Qwen2.5's longest token), multi-byte
# characters, a text NFC changes (no bound: tokenized), an added token that is not special, and a special token.
BOUND_PIECES = [' ' * 128, 'y ', 'é', 'e\u0301', '中文', '😀', '<tool_call>', '<|im_start|>', '\n', 'Ġ', '\u212b']


def test_byte_bound_never_exceeds_the_exact_count(tok):
    """ChatTokenizer.lower_bound: at most the token count the Rust tokenizer gives, on texts built from the pieces
    above (Hypothesis), so a row it rejects is over the limit."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    assert tok.max_token_bytes == 128  # Qwen2.5's longest vocabulary entry: 128 spaces
    pieces = st.lists(st.tuples(st.sampled_from(BOUND_PIECES), st.integers(1, 80)), max_size=8)

    @settings(max_examples=300, deadline=None)
    @given(pieces)
    def check(parts):
        text = tok.render([{'role': 'user', 'content': ''.join(p * n for p, n in parts)}], True)
        bound = tok.lower_bound(text)
        exact = len(tok.backend.encode(text, add_special_tokens=False))
        assert bound is None or bound <= exact, (bound, exact)
        assert tok.count([text]) == [exact]

    check()


def test_filter_with_the_byte_bound_keeps_and_rejects_the_same_rows(tmp_path, tok):
    """run_filter rejects a row whose byte bound exceeds --max-length without tokenizing it; on rows on both sides of
    that bound (bound = limit - 1, limit, limit + 1, ...; exact counts on both sides of the limit), it keeps and rejects
    exactly the rows that tokenizing every row does."""
    limit = 64
    render = lambda c: tok.render([{'role': 'user', 'content': c}], True)  # noqa: E731
    rows = []
    for piece in (' ' * 128, 'y ', 'é', '中文', '<tool_call>'):
        # the shortest repetition whose bound exceeds the limit, then its neighbours
        n = 1
        while (tok.lower_bound(render(piece * n)) or 0) <= limit + 1 and n < 200_000:
            n = n * 2
        lo, hi = 1, n
        while lo < hi:
            mid = (lo + hi) // 2
            if (tok.lower_bound(render(piece * mid)) or 0) > limit:
                hi = mid
            else:
                lo = mid + 1
        rows += [piece * max(1, lo + d) for d in (-200, -2, -1, 0, 1, 2, 200)]
    rows += [' ' * 128 * k + 'y' for k in range(limit - 40, limit + 4)]  # exact counts across the limit
    rows += ['e\u0301' * 3000]  # NFC changes it: no bound, tokenized
    src = tmp_path / 'rows.jsonl'
    src.write_text(''.join(json.dumps({'question': r}, ensure_ascii=False) + '\n' for r in rows), encoding='utf-8')
    bounds = [tok.lower_bound(render(r)) for r in rows]
    exact = tok.count([render(r) for r in rows])
    assert any(b == limit for b in bounds) and any(b == limit + 1 for b in bounds)
    assert any(n == limit for n in exact) and any(n == limit + 1 for n in exact)
    assert any(b is None for b in bounds)  # the text NFC changes: no bound, tokenized

    with_bound = run_filter(src, tmp_path / 'a.jsonl', tok, max_length=limit)
    without = run_filter(src, tmp_path / 'b.jsonl', tok, max_length=limit, bound=False)
    assert (tmp_path / 'a.jsonl').read_bytes() == (tmp_path / 'b.jsonl').read_bytes()
    rej_a = [json.loads(ln) for ln in (tmp_path / 'a.rejects.jsonl').read_text().splitlines()]
    rej_b = [json.loads(ln) for ln in (tmp_path / 'b.rejects.jsonl').read_text().splitlines()]
    assert [r['line'] for r in rej_a] == [r['line'] for r in rej_b] == [i + 1 for i, n in enumerate(exact) if n > limit]
    assert (with_bound.kept, with_bound.rejected) == (without.kept, without.rejected)
    skipped = [r['line'] for r in rej_a if 'length_at_least' in r]
    assert skipped == [i + 1 for i, b in enumerate(bounds) if b is not None and b > limit]
    assert with_bound.rejected_unmeasured == len(skipped) > 0 and without.rejected_unmeasured == 0
    for r in rej_a:
        i = r['line'] - 1
        assert r.get('length', r.get('length_at_least')) == (exact[i] if 'length' in r else bounds[i]) > limit


def test_huge_line_is_rejected_on_its_bytes(tmp_path):
    """The 10 MB line of test_bom_and_huge_line is over --max-length on its bytes alone: rejected, not tokenized."""
    src = tmp_path / 'd.jsonl'
    src.write_text('{"question": "first"}\n' + json.dumps({'question': 'y ' * 500_000}) + '\n')
    proc, out = run_filter_cli(tmp_path, src)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert (s['kept'], s['rejected'], s['rejected_unmeasured']) == (1, 1, 1)
    rejects = [json.loads(ln) for ln in (tmp_path / 'out.rejects.jsonl').read_text().splitlines()]
    assert [(r['line'], r['length_at_least'] > 64, 'length' in r) for r in rejects] == [(2, True, False)]
