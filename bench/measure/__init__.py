"""How a variant is measured inside its child: clocks, stopping, statistics, guards, outputs and their verification."""
