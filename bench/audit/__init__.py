"""How the harness checks itself: the selfcheck of the clocks against ground truth, the cost of isolation."""
