"""Model facts: architectures (from a Hugging Face config) and weights, shipped in data/models/."""
