"""Compiler passes, one job each; see compiler/pipeline.py for the order."""
