"""Shortest job first: the waiting queue is admitted by how many tokens each request will generate.

The one idea: a request holds its slot for as many steps as it generates tokens, and a client states that
bound up front (max_tokens; real engines also predict it). Admitting the fewest-tokens-first lets the 32 short
requests through in ~4 waves of ~15 steps before the long ones start: the median request's first token comes
after ~2 waves. Predicted on an H100: median TTFT ~0.35 s -> ~0.1 s, ~3-4x; the whole generation takes about
as long (the same tokens; the long requests finish later). The price: long requests wait, and without aging a
steady stream of short ones would starve them.
"""

from chapters.ch15.common import Serve
from chapters.ch16.common import convoy, scheduled_engine


def get_benchmark() -> Serve:
    return Serve(convoy, lambda w: scheduled_engine(w, "sjf"), "ttft")
