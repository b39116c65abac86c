"""The host side of one sandbox run: prepare, drive the channel, classify."""
