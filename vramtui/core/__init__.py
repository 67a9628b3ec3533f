"""The pure core of vramtui: no Textual import anywhere below this package."""
