"""Models the cookbook ships or embeds (the default CPU model)."""
