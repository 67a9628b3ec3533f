"""Files tests stand in for real ones where only their presence matters."""

# A GGUF header with no tensors and no metadata: a model file that is there and whole. A bare b"GGUF" is a
# download cut inside its header, which a profile's check refuses before launch.
EMPTY_GGUF = b"GGUF" + (3).to_bytes(4, "little") + bytes(16)

# A tiny Qwen2 config.json trained on 2048 tokens: a folder the estimate reads a shape from (no weights).
TINY_QWEN2_CONFIG = dict(
    architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=64, intermediate_size=128,
    num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2, vocab_size=1000,
    max_position_embeddings=2048, torch_dtype="bfloat16",
)  # fmt: skip
