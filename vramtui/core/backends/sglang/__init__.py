"""SGLang."""
