"""Memory as computed: the model's numbers, quantizations, and the estimate per backend."""
