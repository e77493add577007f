"""Thin click commands over the library (one short module each)."""
