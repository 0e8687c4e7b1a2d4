"""Checks of rendered apps and foreign charts: the pure layers (check/pure.py), what lint reads and how
(check/inputs.py), helm and the Kubernetes schemas (check/lint.py, check/kube.py)."""
