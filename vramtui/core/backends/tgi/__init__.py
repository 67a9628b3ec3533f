"""text-generation-inference."""
