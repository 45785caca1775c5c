"""Synthetic traces for tests, examples and benchmarks: `synth` (exact Timelines from span
dicts; prover-shaped runs with noise and injected slowdowns) and `synthetic` (large
prover-like OTLP JSON Lines files), and `activity_records` (CUPTI-like activity record dicts ->
GPU activity spans -> a Timeline, the reference for the nsys/CUPTI equivalence tests).

Never imported by the product packages (an import-linter contract in pyproject.toml).
"""
