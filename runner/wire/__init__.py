"""The host ↔ sandbox contract: standard library only, Python 3.9+, imported by both sides."""
