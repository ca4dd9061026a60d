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
# flushed, the exit status as sys.exit gives it.
cli.kept = []
status = cli.main()
if "sassas.ranges" in sys.modules:
    sys.modules["sassas.ranges"].wait_for_children()
sys.stdout.flush()
sys.stderr.flush()
os._exit(status)
