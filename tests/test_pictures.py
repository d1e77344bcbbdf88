"""Pictures of the plan: `check`'s bars (each GPU's memory by phase against its capacity), `check --plot` (the same
as a figure) and `trace --snapshot` (the traced step as a PyTorch memory snapshot, read back by torch's own
torch.cuda._memory_viz)."""

import io
import pickle

import pytest
from helpers import make
from rich.console import Console

from grpo_recipes.cli.bars import CATEGORIES, categories, gpu_phases, print_bars
from grpo_recipes.cli.guard import main

RECIPE_40G = 'recipes/qwen2.5-7b-instruct/lora-2xa100-40g.yaml'


def _bars(report, width=120) -> str:
    out = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
    print_bars(report, out)
    return out.file.getvalue()


def test_each_phase_bar_adds_up_to_the_phase_figure():
    _, report = make({'sleep_level': 1})
    m = report.memory[0]
    drawn = gpu_phases(m)
    assert [p for p, _ in drawn] == ['startup', 'rollout', 'sync', 'train']
    for phase, cats in drawn:
        assert set(cats) == {c[0] for c in CATEGORIES}
        assert sum(cats.values()) == pytest.approx(m.phases[phase], abs=0.05)
    train = dict(drawn)['train']
    assert train['weights'] > 14 and train['logits'] > 0 and train['context'] > 0
    assert dict(drawn)['rollout']['vLLM'] > 0 and dict(drawn)['rollout']['logits'] == 0
    text = _bars(report)
    for phase in m.phases:
        line = next(ln for ln in text.splitlines() if f' {phase} ' in ln)
        assert f'{m.phases[phase]:6.1f}' in line and '│' in line
        assert len(line) <= 120
    assert all(f'{c[1]} {c[0]}' in text for c in CATEGORIES)  # the legend: every category's character


def test_overlap_comes_off_the_activations_then_the_logits():
    assert categories({'activations': 1.0, 'logits': 3.0, 'overlap': -2.5}) == pytest.approx(
        {'weights': 0, 'optimizer': 0, 'activations': 0, 'logits': 1.5, 'vLLM': 0, 'reserve': 0, 'context': 0}
    )


def test_an_oom_bar_runs_past_the_capacity_mark():
    _, report = make(
        {'per_device_train_batch_size': 64, 'vllm_gpu_memory_utilization': 0.7},
        env={'CUDA_VISIBLE_DEVICES': '0', 'NPROC_PER_NODE': 1},
    )
    m = report.memory[0]
    assert not m.fits
    line = next(ln for ln in _bars(report, 100).splitlines() if f' {m.phase} ' in ln)
    bar = line.split(m.phase, 1)[1]
    assert bar.index('│') < len(bar.rstrip(' 0123456789.%').rstrip()) - 1  # category cells after the mark
    assert f'{m.total_gib / m.capacity_gib:4.0%}' in line


def test_narrow_terminal_keeps_every_bar_line_within_its_width():
    _, report = make()
    for line in _bars(report, 60).splitlines():
        assert len(line) <= 60


@pytest.mark.parametrize('ext,magic', [('svg', b'<?xml'), ('png', b'\x89PNG')])
def test_check_plot_writes_the_figure(tmp_path, capsys, ext, magic):
    out = tmp_path / f'memory.{ext}'
    code = main(['check', RECIPE_40G, '--gpus', '2', '--gpu-type', 'A100-40G', '--plot', str(out)])
    assert code == 0, capsys.readouterr()
    assert out.read_bytes().startswith(magic)
    if ext == 'svg':
        svg = out.read_text()
        assert 'startup' in svg and 'capacity 39.4 GiB' in svg


def test_check_plot_to_a_file_it_cannot_write_is_one_line(tmp_path, capsys):
    code = main(['check', RECIPE_40G, '--gpus', '2', '--gpu-type', 'A100-40G', '--plot', str(tmp_path / 'x.nope')])
    err = capsys.readouterr().err
    assert code == 2 and '--plot' in err and 'Traceback' not in err and len(err.strip().splitlines()) == 1


TINY = {
    'architectures': ['Qwen2ForCausalLM'],
    'model_type': 'qwen2',
    'hidden_size': 64,
    'intermediate_size': 160,
    'num_hidden_layers': 2,
    'num_attention_heads': 4,
    'num_key_value_heads': 2,
    'vocab_size': 512,
    'tie_word_embeddings': False,
    'max_position_embeddings': 2048,
    'torch_dtype': 'float32',
}


def _replayed(data):
    """Walk the snapshot's trace as memory_viz does: the largest reserved (segments) and allocated totals."""
    reserved = allocated = peak_r = peak_a = 0
    for e in data['device_traces'][0]:
        sign = {
            'alloc': 1,
            'free_completed': -1,
            'segment_alloc': 2,
            'segment_map': 2,
            'segment_free': -2,
            'segment_unmap': -2,
        }.get(e['action'], 0)
        if abs(sign) == 1:
            allocated += sign * e['size']
        elif sign:
            reserved += sign // 2 * e['size']
        peak_r, peak_a = max(peak_r, reserved), max(peak_a, allocated)
    return peak_r, peak_a, reserved, allocated


@pytest.mark.parametrize('alloc', ['', 'expandable_segments:True'])
def test_snapshot_of_a_traced_step_opens_in_torchs_memory_viz(tmp_path, alloc):
    from torch.cuda import _memory_viz

    from grpo_recipes.allocconf import conf_of
    from grpo_recipes.config import GRPOConfig
    from grpo_recipes.memory import snapshot, trace
    from grpo_recipes.memory.allocator import replay
    from grpo_recipes.memory.snapshot import write_snapshot
    from grpo_recipes.memory.trace import trace_step

    assert snapshot.RELEASED == trace.RELEASED
    cfg = GRPOConfig.from_argv(
        [
            '--rlhf_type',
            'grpo',
            '--tuner_type',
            'lora',
            '--per_device_train_batch_size',
            '2',
            '--max_completion_length',
            '48',
            '--torch_dtype',
            'float32',
        ]
    )[0]
    counter, _, _ = trace_step(cfg, TINY, 16)
    assert len(counter.event_stages) == len(counter.events)
    path = tmp_path / 'step.pickle'
    write_snapshot(str(path), counter.events, counter.event_stages, alloc)
    data = pickle.loads(path.read_bytes())
    stats = replay(counter.events, conf_of(alloc))
    peak_r, peak_a, reserved, allocated = _replayed(data)
    assert peak_r == stats.peak_reserved and peak_a == stats.peak_allocated
    assert reserved == sum(s['total_size'] for s in data['segments'])
    # taken at the step's end: the weights, adapters, gradients and AdamW states are still held
    assert allocated == sum(s['allocated_size'] for s in data['segments']) > 0
    held = sum(n for e, st in zip(counter.events, counter.event_stages) if st == trace.RELEASED for n in [e[1]] if n)
    assert held == 0  # nothing is allocated once the step is over, only freed
    assert {e['frames'][0]['name'] for e in data['device_traces'][0]} >= {'load', 'step 1 optimizer', 'step 2 backward'}
    assert all(s['is_expandable'] == bool(alloc) for s in data['segments'])
    summary = _memory_viz.segsum(data)  # torch's own reader: raises on blocks that do not add up to their segment
    assert f'segments: {len(data["segments"])}' in summary
    assert 'entries' in _memory_viz.trace(data)
    for html in (_memory_viz.trace_plot(data), _memory_viz.segment_plot(data)):
        assert 'MemoryViz.js' in html and 'snapshot.pickle' in html


def test_trace_cli_writes_the_snapshot(tmp_path, capsys, write_yaml):
    import json

    (tmp_path / 'tiny').mkdir()
    (tmp_path / 'tiny' / 'config.json').write_text(json.dumps(TINY))
    cfg = write_yaml(
        'rlhf_type: grpo\nmodel: Qwen/Qwen2.5-0.5B-Instruct\ntuner_type: lora\ntorch_dtype: float32\n'
        'per_device_train_batch_size: 2\nnum_generations: 2\nmax_length: 16\nmax_completion_length: 32\n'
        'reward_funcs: [format]\ndataset: [data.jsonl]\n'
    )
    out = tmp_path / 'snap.pickle'
    code = main(
        ['trace', str(cfg), '--model-config', str(tmp_path / 'tiny'), '--snapshot', str(out), '--json', '--force']
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert 'memory_viz' in captured.err
    result = json.loads(captured.out)
    assert 'events' not in result
    data = pickle.loads(out.read_bytes())
    peak_r, _, _, _ = _replayed(data)
    assert peak_r > 0 and data['segments']
    # an ms-swift launch: the old policy's no-grad log-probabilities pass before each step (ms-swift 4.6
    # _prepare_batch_inputs; tests/test_logits_span.py holds the count to a real run), named in the snapshot's frames
    stages = {f['name'] for t in data['device_traces'][0] for f in t.get('frames', ())}
    assert {'step 1 old log-probs pass', 'step 2 old log-probs pass'} <= stages, stages
