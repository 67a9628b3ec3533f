"""The four panes of the app; each draws what the core computes."""
