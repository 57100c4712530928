"""Models served by the inference chapters, built in the repository: no downloads, weights from a seed."""

from models.gpt import GPT, GPTConfig, Segment, Top2, greedy, greedy_top2, preset
from models.kv import ContiguousCache, PagedCache

__all__ = ["GPT", "ContiguousCache", "GPTConfig", "PagedCache", "Segment", "Top2", "greedy", "greedy_top2", "preset"]
