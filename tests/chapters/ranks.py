"""The gloo ranks the chapter tests start (``torch.multiprocessing.start_processes``, spawned interpreters)."""

from __future__ import annotations

import os
import sys


def end_rank() -> None:
    """A rank's end once its results are saved: the process exits without the interpreter freeing torch's modules
    and objects one by one (2-3 s per rank on the 2-core host, for which the parent waits), as the test session's
    workers end (tests/session.py). An exception before this point still ends the rank through
    ``start_processes``' own handling, its traceback reported."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
