"""The vllm engine family."""
