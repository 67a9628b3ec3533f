"""The transformers engine family."""
