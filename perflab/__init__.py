"""The ``perflab`` command: the harness's commands (``bench.cli``) and those of the packages built on it
(``analysis``, ``sweeps``, ``kernels``) in one app. It stands on all of them; none of them imports it."""
