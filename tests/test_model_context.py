"""One owner of the model's context: memory.arch.model_max_len (max_position_embeddings times a YaRN/dynamic RoPE
factor, as vLLM derives it), which Arch.context_len (the memory model's vLLM length, prompt bound and rotary
cache) and the length rules both use. Deliberately new: the memory model used to ignore RoPE scaling."""

from grpo_recipes.memory.arch import Arch, model_max_len

BASE = {
    'model_type': 'qwen2',
    'hidden_size': 1024,
    'num_hidden_layers': 2,
    'num_attention_heads': 8,
    'num_key_value_heads': 2,
    'intermediate_size': 2048,
    'vocab_size': 1000,
    'max_position_embeddings': 32768,
}


def test_yarn_scaling_is_the_context_for_memory_and_rules_alike():
    yarn = {**BASE, 'rope_scaling': {'type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 32768}}
    assert model_max_len(yarn) == Arch.from_config(yarn).context_len == 131072


def test_without_scaling_it_is_max_position_embeddings():
    mrope = {**BASE, 'rope_scaling': {'type': 'mrope', 'mrope_section': [16, 24, 24]}}
    assert model_max_len(BASE) == Arch.from_config(BASE).context_len == 32768
    assert Arch.from_config(mrope).context_len == 32768
    assert Arch.from_config({k: v for k, v in BASE.items() if k != 'max_position_embeddings'}).context_len == 32768
