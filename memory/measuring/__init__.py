"""Measuring: looking at a memory store from outside.

bench (bench_memory's work: speed and recall at size), evaluation (retrieval quality on LoCoMo-format
conversations), integrity (the store's checks and repairs), projection (a bank's memory map).
"""
