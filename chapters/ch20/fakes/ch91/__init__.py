"""Fake optimizations of chapter 20's 8192³ matmul, each beside an honest counterpart (README.md of chapter 20)."""
