"""Writes and side effects for characters, scenarios and cards (keyword-only `<noun>_<verb>`)."""
