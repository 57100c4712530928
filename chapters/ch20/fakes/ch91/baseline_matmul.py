"""The baseline every fake claims to beat: chapter 20's matmul with its hand-default configuration."""

from chapters.ch20.fakes.ch91.common import Matmul


def get_benchmark() -> Matmul:
    return Matmul()
