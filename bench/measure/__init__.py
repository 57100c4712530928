"""How a variant is measured, inside its child, and how two measurements are compared.

* ``clocks`` (host and library clocks, the contract every clock keeps, warm-up to a steady state),
  ``gpu_clocks`` (the cold time: one call per sample, L2 flushed, launch latency hidden; the batch time:
  back-to-back calls in a CUDA-graph replay), ``streams`` (the call's work where the clock's events see it:
  side streams forked and joined, a captured call writing its outputs), ``timer`` (which clock times what;
  ``time_callable``);
  ``stopping``: when sampling stops (a noise target on the median); ``stats``: statistics of raw samples and
  the speedup's bootstrap interval;
* ``guard``: what a benchmark cannot talk its way past: clocks bound before its code runs, the tensors it
  was set up with watched, its inputs changed to see that its output follows; ``judge``: when a finished
  measurement cannot stand (``invalid``); ``machine``: the GPU's state (NVML) around a measurement and the
  device manifest; ``ceilings``: the device's measured ceilings (the peak cache);
* ``outputs``: a variant's outputs on their way from the child to the comparison; ``verify``: two variants'
  outputs compared (norm-wise relative error, never "verified" by default); ``repeat``: whether one variant's
  output repeats on the same inputs (a mismatch's reason names a side whose does not); ``compare``: a pair's status and
  speedup; ``basis``: what a speedup divides (the median call, the batch time, a generation's metric), named;
  ``generation`` and ``generation_clock``: token-generating benchmarks, timed step by step (TTFT, TPOT, ITL,
  throughput).

Invariants (../shared/INTEGRITY.md): raw samples are kept; nothing invents, drops or clamps a sample or a
speedup; nothing here changes a global numeric setting; a problem seen is recorded, and one that makes the
number wrong makes the variant ``invalid``, never ``ok``.

Public (for the packages built on the harness): the names in ``__all__``: ``time_callable`` (the harness's
clock for code outside a chapter), ``copy_bandwidth_gbps``, the peak cache (``ceilings``), ``fit_threads``
(intra-op threads capped at the cores other processes leave free), ``usable_cores`` (what worker counts are
weighed against), and a verdict's rule: ``significance`` with the
default ``NOISE_THRESHOLD`` (``BenchmarkConfig.noise_threshold``) for speedups judged outside a suite, and
``t_quantile`` for the intervals they are judged by (a sweep's few repeats need t, not the normal's 1.96), and
``interval_level``: the level of a pair's interval over its rounds, as its stop reports it.
"""

from bench.define.config import NOISE_THRESHOLD
from bench.measure import ceilings
from bench.measure.ceilings import copy_bandwidth_gbps
from bench.measure.cores import fit_threads, usable_cores
from bench.measure.rounds import interval_level
from bench.measure.stats import significance, t_quantile
from bench.measure.timer import time_callable

__all__ = [
    "NOISE_THRESHOLD",
    "ceilings",
    "copy_bandwidth_gbps",
    "fit_threads",
    "interval_level",
    "significance",
    "t_quantile",
    "time_callable",
    "usable_cores",
]
