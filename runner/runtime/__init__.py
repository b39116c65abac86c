"""The in-sandbox runtime. Standard library only, Python 3.9+: it runs inside the user's image."""
