"""Sandbox backends: the interface (`base`) and its implementations (docker)."""
