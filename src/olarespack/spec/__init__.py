"""The app spec: its models, how a file is loaded and guarded, and its cross-field rules."""
