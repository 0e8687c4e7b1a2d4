"""The ground floor: errors and the rule catalog, redaction, the bounded base types of spec models, YAML
reading, units and quantities, the Chart value and the GPU profiles. Nothing here imports another part of
olarespack, so every floor above may import it."""
