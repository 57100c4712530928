"""Optuna sweeps over training configurations (issue: sweeps). Depends on bench only."""
