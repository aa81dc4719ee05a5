"""Square-matrix functions with NumPy's names and semantics (batched over leading axes):
linear systems, inverses, determinants, Cholesky, triangular parts, trace, powers."""
