"""The learner: derives and verifies the ISA descriptions (sassas/isa/data/sm_XX.toml) and the
control rules (sassas/isa/data/control.toml) from NVIDIA's tools (ptxas, nvdisasm: the oracle).
A development tool: it sits beside the ISA layer, which never imports it, and runs only when a
description is (re)learned or a test compares with the oracle.

    python -m sassas.learn --arch sm_90          (sassas.learn.driver)
    python -m sassas.learn.oracle --fetch-legacy (nvdisasm/cuobjdump 12.8, for sm_70)
    python -m sassas.learn.latency --arch sm_120 (an arch's latency table from ptxas's code)
"""
