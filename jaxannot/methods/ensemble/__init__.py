"""Composite methods: ``ensemble``, a weighted fusion of registered methods chosen by
cross-validation on the training images (:mod:`.annotator`; the fusion rule and its
choice in :mod:`.fusion`, the fitted parameters in :mod:`.params`).
"""
