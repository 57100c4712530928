"""65 536 random 3 KiB records read one by one in a Python loop: seek, read, copy into the batch.

The plain way: for each index, f.seek + f.read on a buffered file (each read pulls 8 KiB, the buffer's
size, through a read() system call and copies 3 KiB out), then a copy of the record into the batch's
bytearray; when the batch is complete, one blocking copy from pageable memory to the device. One thread,
~2-4 us of interpreter and system-call time per record, and the copies in turn.

Page cache: warm (the file was just written in setup; both sides read it from the page cache).
Expected on the H100 host: ~65 536 x 3-5 us ~ 0.2-0.3 s (the loop alone measured 0.30 s on the 2-core CI
machine), plus ~15 ms for the pageable copy: ~0.7-1 GB/s of records, a fraction of the page cache's
single-thread read bandwidth (recorded as page_cache_read_gbps).

Work per call (both sides): 192 MiB of records read and delivered as fp32 (common.RecordFile).
Timed with the wall clock.
"""

import torch

from chapters.ch05.common import RecordFile, to_device


class Loop(RecordFile):
    made = (*RecordFile.made, "file", "buf")

    def open(self) -> None:
        self.file = open(self.path, "rb")  # noqa: SIM115  (closed in close())
        self.buf = bytearray(self.idx.numel() * self.record)

    def benchmark_fn(self) -> None:
        r = self.record
        for k, i in enumerate(self.idx.tolist()):
            self.file.seek(i * r)
            self.buf[k * r : (k + 1) * r] = self.file.read(r)
        to_device(torch.frombuffer(self.buf, dtype=torch.uint8).view(-1, r), self.staging, self.out)

    def close(self) -> None:
        self.file.close()


def get_benchmark() -> RecordFile:
    return Loop()
