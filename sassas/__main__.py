import gc
import os
import sys

# The cyclic garbage collector is off for the command's short life (the process ends without
# tearing down, below): its passes over the objects of the imports and the ISA description took
# a fifth of the CPU time of assembling a small file. Reference counting still frees what is
# dropped; the few reference cycles a command leaves live until the process ends.
gc.disable()

from . import cli  # noqa: E402

# What the command built is kept (cli.kept) and the process ends without freeing it: output
# flushed, the exit status as sys.exit gives it. A worker of `asm -t N` (sassas.ranges) has sent
# all it had when the command ends, but the kernel takes some 20-40 ms to free its memory: the
# command does not wait for that (the worker's parent after this one, init or a subreaper,
# reaps it; benchmarks/bench_assemble.py is one, to count its CPU time).
cli.kept = []
status = cli.main()
sys.stdout.flush()
sys.stderr.flush()
os._exit(status)
