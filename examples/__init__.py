"""Example applications built on tracebus's job layer (each needs no change below it)."""
