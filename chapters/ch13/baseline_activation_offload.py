"""The long-context training step of ``activation_checkpointing``, every saved activation on the device.

The same model, step and peak as that pair's baseline (chapters/ch13/memory.py, ``Activations``): ~12-13 GB
predicted on an H100 or H200 (not measured), most of it the saved activations. The pair's metric is the peak
(``peak_memory``, per call). Clock: wall.
"""

from chapters.ch13.memory import Activations


def get_benchmark() -> Activations:
    return Activations("keep")
