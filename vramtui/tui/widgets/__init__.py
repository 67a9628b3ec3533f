"""Widgets the panes are built from."""
