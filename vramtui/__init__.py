"""vramtui: get a local LLM to start and stay up on the GPU you have."""

__version__ = "0.1.0"
