"""olarespack: one typed spec per app, rendered into a versioned Olares Helm chart."""

__version__ = "0.1.0"
