"""Reproduce: inputs, packets, the strict replay and its verdict."""
