"""microbench: GPU microbenchmarks written in SASS, assembled by sassas, each run beside a
CUDA-C reference compiled at run time with NVRTC.

    python -m microbench list
    python -m microbench run all --quick --json results.json --plot figures/

See microbench/README.md.
"""
__version__ = "0.1.0"
