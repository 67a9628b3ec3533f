"""The llama_cpp engine family."""
