"""perflab's harness. Chapters, sweeps and analysis import only these names."""

from bench.define.config import BenchmarkConfig, resolve_config
from bench.define.context import context
from bench.define.protocol import Benchmark
from bench.define.result import Comparison, SuiteResult, VariantResult
from bench.errors import PerflabError
from bench.isolate.suite import run_suite
from bench.measure.compare import compare
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
    "nvtx_range",
    "resolve_config",
    "run_suite",
]
