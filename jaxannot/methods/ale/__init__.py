"""Approximate Laplacian Eigenmaps (seed 002): transductive ALE and inductive IALE
with smooth-function or SVM detectors, and the GSF / BSVM baselines. Eigenfunctions in
:mod:`.eigenfunctions` (their eigenproblems in :mod:`.eigenproblem`), detectors in
:mod:`.smooth_function` (trained and scored in :mod:`.detectors`), annotators in
:mod:`.annotators` (the ALE model as fitted and saved in :mod:`.fitted_model`).
"""
