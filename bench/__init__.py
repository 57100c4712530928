"""perflab's harness. Chapters, sweeps and analysis import only these names."""

from bench.compare import compare
from bench.config import BenchmarkConfig, resolve_config
from bench.context import context
from bench.errors import PerflabError
from bench.markers import nvtx_range
from bench.protocol import Benchmark
from bench.result import Comparison, SuiteResult, VariantResult
from bench.suite import run_suite

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
