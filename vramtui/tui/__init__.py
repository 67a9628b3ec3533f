"""The Textual app. Import `vramtui.tui.app.run_app` lazily: Textual is not needed by the CLI."""
