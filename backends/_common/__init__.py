"""Dialect-free pieces of device backends."""
