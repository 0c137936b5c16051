"""EMML structured annotation (seed 004) and its MBRM baseline. VReps and the joint
feature map in :mod:`.structured_output`; the working-set dual solver in
:mod:`.working_set`, the exact solve in :mod:`.exact`, the cutting-plane baseline in
:mod:`.cutting_plane`; MBRM in :mod:`.mbrm`; annotators in :mod:`.annotators`.
"""
