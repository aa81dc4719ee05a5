"""Cumulative and selection ops: cumsum, cumprod, top_k, bincount."""
