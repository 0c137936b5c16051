"""Multi-view harmoniums (seed 001): the dual-wing harmonium (DWH), its supervised
(TWH) and max-margin (MMH) versions. Model in :mod:`.harmonium`, MMH's alternation in
:mod:`.max_margin_harmonium` (the pieces of its two steps in :mod:`.mmh_steps`);
annotators in :mod:`.dwh_annotators` and :mod:`.classifier_annotators`, their CD
training in :mod:`.cd_training` and an MMH fit's alternation in :mod:`.mmh_training`.
"""
