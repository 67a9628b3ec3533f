"""Small model servers vramtui launches itself (run as `python -m vramtui.runners.<name>`)."""
