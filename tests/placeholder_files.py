"""Files tests stand in for real ones where only their presence matters."""

# A GGUF header with no tensors and no metadata: a model file that is there and whole. A bare b"GGUF" is a
# download cut inside its header, which a profile's check refuses before launch.
EMPTY_GGUF = b"GGUF" + (3).to_bytes(4, "little") + bytes(16)
