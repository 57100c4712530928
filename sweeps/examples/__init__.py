"""Worked examples of a user's own sweep workload (``perflab sweep run --workload sweeps.examples.NAME:make``)."""
