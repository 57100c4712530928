"""Chapter 20: automated optimization — configurations found by a search (Triton's autotuner) against hand
defaults, each search's cost recorded beside its gain; and fake "optimizations" the harness must reject."""
