"""Facts of Olares: manifest generations and versions, reserved names, the values Olares injects, and its
chart rules, each mirroring a function of Olares' own linter (oac): the manifest (olares/manifest.py), the chart
files (olares/chartfiles.py) and the rendered workloads (olares/workloads.py)."""
