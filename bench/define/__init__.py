"""What a benchmark is: the nouns every later step passes on.

* ``protocol``: a benchmark file's ``get_benchmark()`` and the object's methods (``setup``, ``benchmark_fn``,
  ``teardown``; optionally ``get_config``, ``get_output``, ``get_work``, ``get_inputs``, ``validate_result``);
* ``config``: ``BenchmarkConfig``, the one source of defaults, layered defaults → suite file → the benchmark's
  ``get_config()`` → CLI flags, later explicit fields winning;
* ``context``: what a benchmark may ask while it runs (device, seed, smoke or full size, sizes relative to
  the device, what it needs to run at all);
* ``cuda``: CUDA C++ source compiled with NVRTC (cached), loaded and launched on torch's stream through cuda.core,
  each kernel's resources recorded in the result (``bench.cuda_source``);
* ``discovery``: ``chapters/chNN/baseline_<x>.py`` ↔ ``optimized_<x>[_<v>].py``, and targets (``ch7:x``);
* ``result``: what a run yields, raw samples kept (``VariantSpec`` → ``VariantResult`` → ``Comparison`` →
  ``SuiteResult``); every later package fills or reads these.

Invariants: nothing here imports torch at import time, times anything or starts a process; a bad value is
a ``bench.errors`` exception naming the field and the value.

Public (for the packages built on the harness): the names in ``__all__``.
"""

from bench.define.discovery import chapter_id, default_chapters_dir

__all__ = ["chapter_id", "default_chapters_dir"]
