"""Launching a model server: profiles, the process, readiness, the smallest request."""
