"""One small exception hierarchy: every error perflab raises on bad input is a PerflabError."""


class PerflabError(Exception):
    """Base of every perflab error; the message names the bad value and what is accepted."""


class ConfigError(PerflabError, ValueError):
    """An invalid configuration field or file."""


class TargetError(PerflabError, LookupError):
    """An unknown chapter or example in a target, or a malformed target string."""


class ProtocolError(PerflabError, TypeError):
    """A benchmark module or object that does not follow the benchmark protocol."""


class Skip(PerflabError):
    """Raised through ``context().require(...)`` / ``context().skip(reason)``: this host cannot run the
    variant (two GPUs, FP8, a tool). The variant ends ``skipped`` with the reason, never failed."""


class CudaCompileError(PerflabError, RuntimeError):
    """CUDA C++ that NVRTC refused (the message holds its log), or a compiled kernel the driver did not load."""
