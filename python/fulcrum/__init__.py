"""Fulcrum's Python tools. `fulcrum.pack` writes and reads the packed dataset format
(docs/dataset-format.md) that fulcrum-trainer memory-maps."""
