"""perflab's harness: baseline vs optimized variants, each measured in a fresh process, compared honestly.

These names are the public API: a benchmark file imports only them (``from bench import context,
BenchmarkConfig``). Packages built on the harness (analysis, sweeps, kernels) may also import ``bench.errors``
and the names a subpackage lists in its ``__all__`` (``bench.record``: the MLflow store; ``bench.measure``:
the clock for code outside a chapter, the peak cache; ...), never a module inside a subpackage.
docs/design.md has the packages, the path of a measurement and the rules; scripts/code_shape.py checks them.
"""

from bench.define.config import BenchmarkConfig, resolve_config
from bench.define.context import context
from bench.define.cuda import cuda_source
from bench.define.protocol import Benchmark
from bench.define.result import Comparison, SuiteResult, VariantResult
from bench.errors import PerflabError
from bench.isolate.suite import run_suite
from bench.measure.compare import compare
from bench.measure.timer import time_alone
from bench.profile.markers import nvtx_range

__all__ = [
    "Benchmark",
    "BenchmarkConfig",
    "Comparison",
    "PerflabError",
    "SuiteResult",
    "VariantResult",
    "compare",
    "context",
    "cuda_source",
    "nvtx_range",
    "resolve_config",
    "run_suite",
    "time_alone",
]
