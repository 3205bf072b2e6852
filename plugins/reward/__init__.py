"""Bundled reward pieces: the reward components of both presets and the tool-call parsers."""
