"""Spectral decompositions with NumPy's names and semantics (batched over leading axes):
eigh, eigvalsh, svd, svdvals, pinv, lstsq, matrix and vector norms."""
