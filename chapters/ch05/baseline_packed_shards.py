"""16 384 random records read from one small file each: open, read, close, per record.

A dataset stored as one file per sample (20 000 files of 4 KiB). Every record costs an open() (path
lookup, a file descriptor, a Python file object), a read into the batch and a close(): three system
calls and an object's life, ~8-10 us, for 4 KiB that the page cache serves in ~1 us.

Page cache: warm (the files were written in setup, metadata cached too). Expected on the H100 host:
16 384 x ~8 us ~ 0.13 s per call, plus the copy to the device (measured, reads only: 151 ms on the 2-core
CI machine).

Work per call (both sides): 64 MiB of records read and delivered as fp32 (common.Shards). Timed with the
wall clock.
"""

from pathlib import Path

import numpy as np

from chapters.ch05.common import Shards


class OneFileEach(Shards):
    def store(self, directory: Path, data: bytes, records: int) -> None:
        r = self.record
        self.paths = [directory / f"{i:06d}.bin" for i in range(records)]
        for i, path in enumerate(self.paths):
            path.write_bytes(data[i * r : (i + 1) * r])

    def read(self, i: int, into: np.ndarray) -> None:
        with open(self.paths[i], "rb", buffering=0) as f:
            f.readinto(into)


def get_benchmark() -> Shards:
    return OneFileEach()
