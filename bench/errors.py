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


def unparsable(what: str, path: object, kind: str, exc: BaseException, accepted: str) -> ConfigError:
    """The one wording of a file its parser refused, in one line: ``{what} '{path}' is not valid {kind}: {the
    parser's complaint, at line L, column C where it gives them}; {accepted}``. PyYAML's own text spans four lines
    and names the file "<unicode string>"; json's counts a character offset; no traceback either way."""
    return ConfigError(f"{what} {str(path)!r} is not valid {kind}: {_complaint(exc)}; {accepted}")


def _complaint(exc: BaseException) -> str:
    def at(mark: object) -> str:  # PyYAML's marks count from 0; an editor counts from 1
        line, column = getattr(mark, "line", None), getattr(mark, "column", None)
        return f" at line {line + 1}, column {column + 1}" if line is not None and column is not None else ""

    problem = getattr(exc, "problem", None)
    if problem is not None:  # PyYAML's MarkedYAMLError: what it was in (context), what it found (problem)
        context = getattr(exc, "context", None)
        where = f"{context}{at(getattr(exc, 'context_mark', None))}: " if context else ""
        return f"{where}{problem}{at(getattr(exc, 'problem_mark', None))}"
    msg, line, column = getattr(exc, "msg", None), getattr(exc, "lineno", None), getattr(exc, "colno", None)
    if isinstance(msg, str) and line is not None and column is not None:  # json's
        return f"{msg} at line {line}, column {column}"
    position = getattr(exc, "position", None)
    if isinstance(position, int) and hasattr(exc, "character"):  # PyYAML's ReaderError: a character it refuses
        return f"{str(exc).splitlines()[0]} at character {position + 1}"
    return " ".join(str(exc).split())  # tomllib's ("... (at line 1, column 14)"), a file not in UTF-8
