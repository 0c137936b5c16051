"""Baselines every annotation paper compares with: empirical word frequencies and kNN
label transfer (:mod:`.annotators`), TagProp (:mod:`.tagprop`, annotator in
:mod:`.tagprop_annotator`).
"""
