"""Build a tiny random Qwen2 model with a Qwen-style BPE tokenizer, locally (no hub), for CPU runs.

Recipe from ../shared/reference/ms-swift-on-cpu.md §3.2: a byte-level BPE trained on a small arithmetic
corpus with the Qwen pre-tokenizer regex, Qwen's special tokens and the real Qwen2.5 chat template
(read from the bundled tokenizer), and a 2-layer Qwen2ForCausalLM in float32.
"""

import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QWEN_PAT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
    r'\s+(?!\S)|\s+'
)
SPECIALS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>']
WORDS = (
    'what is the answer problem step solve final give boxed total each many how much she he they '
    'apples books cars days hours more less than sum of and then so'
).split()


def corpus(n=4000, seed=0):
    rng = random.Random(seed)
    for _ in range(n):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        yield f'What is {a} + {b}? Solve the problem step by step, then give the final answer as \\boxed{{{a + b}}}.'
        yield ' '.join(rng.choice(WORDS) for _ in range(12)) + f' #### {a * b}'


def build(out: Path, hidden: int = 64, seed: int = 0) -> Path:
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM, Qwen2Tokenizer

    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PAT), behavior='isolated', invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        corpus(),
        trainer=trainers.BpeTrainer(
            vocab_size=480,
            min_frequency=2,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            special_tokens=[],
        ),
    )
    state = json.loads(tok.to_str())
    vocab, merges = state['model']['vocab'], state['model']['merges']
    for t in SPECIALS:
        vocab[t] = len(vocab)
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(' ')) for m in merges]
    hf = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token='<|im_end|>',
        pad_token='<|endoftext|>',
        errors='replace',
        split_special_tokens=False,
        model_max_length=32768,
    )
    hf.add_special_tokens({'additional_special_tokens': ['<|im_start|>', '<|im_end|>']})
    hf.add_tokens(['<|endoftext|>'], special_tokens=True)
    bundled = json.loads((ROOT / 'data_tools' / 'tokenizer' / 'tokenizer_config.json').read_text())
    hf.chat_template = bundled['chat_template']
    hf.save_pretrained(out)
    vocab_size = (len(hf) + 63) // 64 * 64
    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        rope_theta=1e6,
        bos_token_id=hf.convert_tokens_to_ids('<|endoftext|>'),
        eos_token_id=hf.convert_tokens_to_ids('<|im_end|>'),
        pad_token_id=hf.convert_tokens_to_ids('<|endoftext|>'),
    )
    model = Qwen2ForCausalLM(cfg).to(torch.float32)
    model.save_pretrained(out)
    GenerationConfig(
        eos_token_id=[cfg.eos_token_id, cfg.pad_token_id],
        pad_token_id=cfg.pad_token_id,
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
    ).save_pretrained(out)
    return out


if __name__ == '__main__':
    print(build(Path(sys.argv[1])))
