"""Rearranging space and batch: space_to_batch_nd, batch_to_space_nd, depth_to_space."""
