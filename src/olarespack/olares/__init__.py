"""Facts of Olares: manifest generations and versions, reserved names, the values Olares injects, and its
chart rules (on the files, olares/rules.py; on the rendered workloads, olares/workloads.py)."""
