"""Pooling: max_pool and avg_pool (2D and 3D) and pool (dilated)."""
