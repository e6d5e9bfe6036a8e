"""Deployment profile: load, validate, render and launch one SGLang deployment.

Import each name from the module that defines it (`specserve.profile.loader`: load_profile,
ProfileError; `specserve.profile.model`: Profile; `specserve.profile.facts`: facts). This face
imports nothing, so a stdlib-only module of the package (nccl.py, issues.py, algorithms.py)
imports where PyYAML and jsonschema are absent: the SGLang image, where nccl-bench runs.
"""
