"""Topic models of image + text (seed 000): multimodal mixture of unigrams (VEM on a
numpyro declaration, with LapVar graph regularization), pLSA-Words and Link-LDA (VB,
CVB0, SVI). Annotators: :mod:`.mixture_annotators`, :mod:`.plsa_words_annotator`,
:mod:`.link_lda_annotators`; visual words for all of them in :mod:`.visual_words`.
"""
