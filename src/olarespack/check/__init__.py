"""Checks of rendered apps and foreign charts: the pure layers run by the build (project.check_app), what
lint reads and how (check/inputs.py), helm and the Kubernetes schemas (check/lint.py, check/kube.py)."""
