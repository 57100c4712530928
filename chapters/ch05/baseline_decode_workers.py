"""An epoch of compressed images decoded in the main process, one after another.

DataLoader(num_workers=0): for every image the main process reads its bytes (os.pread), inflates them
(zlib), undoes the left-neighbour differences (a running sum along each row, PNG's "Sub" filter) and
reorders HWC to CHW (common.decode_image); only then does it copy the batch to the device. One core
decodes while the others idle, and the device waits for each batch in turn.

Page cache: warm (the file was written in setup). Expected on the H100 host: ~0.5 ms per 128 x 128 image
(0.3 ms inflate + 0.2 ms running sum, single-thread figures from the CI machine), 512 images: ~0.25 s
per epoch, bound by one core. On a busy host it is worse: the main process's small ops run on torch's
intra-op threads, which wait for busy cores (~5 ms per image on the 2-core CI machine under load).

Work per call (both sides): 512 images of 128 x 128 x 3 decoded and delivered as fp32 (common.Images).
Timed with the wall clock.
"""

from chapters.ch05.common import Images


def get_benchmark() -> Images:
    return Images(workers=0)
