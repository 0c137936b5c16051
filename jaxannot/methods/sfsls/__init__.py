"""Sparse feature selection with a shared subspace and graph Laplacian (seed 003):
SFSLS, SFSS and the FSNM baseline. Objective in :mod:`.sparse_projection`, solver in
:mod:`.solver`, FSNM in :mod:`.fsnm`, annotators in :mod:`.annotators`.
"""
