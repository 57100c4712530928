"""How variants run isolated: a fresh process per variant (server, child, runner) and a suite over workers."""
