"""Flash-decoding: the cache's 32,768 keys split across 64 programs per KV head, the partial results merged.

The one idea (Dao et al., "Flash-Decoding for long-context inference", 2023): with one query token, split the
keys instead of the queries. Each of 8 x 64 = 512 programs (4 per SM: common.PROGRAMS_PER_SM, recorded as
``splits`` and ``programs``) walks 512 keys of one KV head for its 4 query heads and writes its unnormalised
output, max and sum (fp32); a second kernel merges the 64 partials of each query head (outputs and sums
weighted by exp2(partial max - overall max)). Every SM streams; the partials are 4 MB against the cache's 134 MB.

Predicted on an H100: ~2.5 TB/s, ~55 us + the merge (~5 us): ~170 us -> ~60 us, ~2.5-3x; ~75-85 % of the copy
bandwidth. The outputs differ from one split's only in summation order (tolerance common.BF16_ATTENTION_RTOL).
"""

from chapters.ch18.common import Attention, bf16_tolerance, decode, decode_problem, keys_per_split


def get_benchmark() -> Attention:
    return Attention(decode_problem, decode, prepare=keys_per_split(True), config=bf16_tolerance())
