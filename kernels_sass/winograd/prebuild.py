"""The CPU commands that produce kernels: sass (print one shape's generated SASS) and prebuild
(assemble the check/bench kernels into the cache, for a GPU machine whose time is short)."""
from __future__ import annotations

import os
import sys
import time
from dataclasses import replace

from .plan import Options, Shape
from .workloads import (ABLATION4_CONFIGS, ABLATION4_FUSED_CONFIGS, ODD, SMOKE, ablation_variants, f4fused_ablation_variants,
                        f4tc_ablation_variants, gemm_options, log, options_from_args, resnet_configs)


def cmd_sass(args) -> int:
    from .sassgen import fit, generate
    from .target import target
    t = target(args.arch)           # (an arch of target.ARCHS: the command line checked it)
    sys.stdout.write(generate(Shape(*args.shape), fit(options_from_args(args), t), t.arch))
    return 0


def cmd_prebuild(args) -> int:
    """Assemble the SASS kernels of the check/bench shapes into the cache (to carry them to a
    GPU machine whose time is short)."""
    from concurrent.futures import ProcessPoolExecutor
    if args.f4fused:
        return prebuild_f4fused(args)
    if args.ablation4:
        return prebuild_ablation4(args)
    jobs = []
    variants = [Options()]
    if args.ablation:
        variants += ablation_variants()
    for name, s in resnet_configs():
        for o in (variants if name.endswith("N128") else [Options()]):
            jobs.append((s, o))
        if args.ablation and name.endswith("N128"):
            jobs.append((Shape(s.N, 2 * s.C, s.H, s.W, s.K), Options()))
    for s in ODD + SMOKE:
        if (s, Options()) not in jobs:
            jobs.append((s, Options()))
    for s in SMOKE:
        jobs.append((s, Options(safe=True)))
    for S in args.split:
        jobs += [(s, Options(split=S)) for _, s in resnet_configs()] + [(s, Options(split=S)) for s in ODD + SMOKE]
    # F(4x4,3x3): the GEMMs of every split (the gemm command times them all, at C and 2C)
    from . import f4, gemmgen
    gemms = set()
    for s in [s for _, s in resnet_configs()] + ODD + SMOKE:
        for parts in range(1, f4.MAX_PARTS + 1):
            for o in map(gemm_options, args.gemm_options):
                g = f4.Plan(s, parts, o).gemm
                for gg in (g, gemmgen.GemmShape(2 * g.C, g.K, g.T, parts)):
                    try:
                        f4.generator(gg, o)
                    except gemmgen.Unsupported:
                        continue
                    gemms.add((gg, o))
    # F(4x4,3x3) fused: the check/bench/smoke shapes with the parts chosen for --sms
    fused = [((parts, layout), s, args.sms) for s in [s for _, s in resnet_configs()] + ODD + SMOKE
             for layout in ("NCHW", "CHWN") for parts in f4fused_parts_on_known_gpus(s, layout, args.sms)]
    t = time.time()
    with ProcessPoolExecutor(max_workers=args.jobs or os.cpu_count()) as ex:
        list(ex.map(_build, [(s, o, args.sms) for s, o in jobs] + [(g, o, None) for g, o in sorted(gemms, key=str)]))
        list(ex.map(_build_f4fused_job, fused))
    log(f"[prebuild] {len(jobs)} F(2x2,3x3) kernels, {len(gemms)} F(4x4,3x3) GEMMs and {len(fused)} fused "
        f"F(4x4,3x3) kernels in {time.time() - t:.1f}s")
    return 0


def f4fused_parts_on_known_gpus(s: Shape, layout: str, sms: int) -> list[int]:
    """The splits conv2d takes for s in `layout` on the GPUs the cost model knows, with `sms` SMs
    (the choice can turn on the memory bandwidth)."""
    from . import cost
    return sorted({cost.f4fused_parts(s, layout, replace(g, sms=sms)) for g in cost.KNOWN_GPUS.values()})


def prebuild_f4fused(args) -> int:
    """The kernels of `device_run.sh f4fused`: the fused F(4x4,3x3) kernels of the check, smoke and
    bench shapes (NCHW and CHWN, the parts f4fused_parts_on_known_gpus picks for `--sms`), and what bench
    compares them with (the F(2x2,3x3) kernels and the chosen
    F(4x4,3x3) GEMMs of the ResNet configurations)."""
    from concurrent.futures import ProcessPoolExecutor
    from . import f4
    configs = [s for _, s in resnet_configs()]
    jobs = [((parts, layout), s) for s in configs + ODD + SMOKE for layout in ("NCHW", "CHWN")
            for parts in f4fused_parts_on_known_gpus(s, layout, args.sms)]
    jobs += [(Options(), s) for s in configs]
    for s in configs:
        for tc in (False, True):
            p = f4.plan(s, args.sms, tc=tc)
            jobs.append((p.options, p.gemm))
    t = time.time()
    with ProcessPoolExecutor(max_workers=args.jobs or os.cpu_count()) as ex:
        list(ex.map(_build_f4fused_job, [(what, s, args.sms) for what, s in jobs]))
    log(f"[prebuild] {len(jobs)} kernels (F(4x4,3x3) fused, F(2x2,3x3), F(4x4,3x3) GEMMs) in {time.time() - t:.1f}s")
    return 0


def ablation4_jobs(sms: int) -> tuple[list, list]:
    """The kernels of `bench --ablation --algo f4tc f4fused` on its default layers: each f4tc
    variant's GEMM (GemmShape, TcOptions; at the split f4.plan chooses for `sms`, where the shape
    takes it) and each f4fused variant's kernel (Shape, parts, f4fused's constants)."""
    from . import f4, gemmgen
    gemms = set()
    for n, s in resnet_configs():
        for v in f4tc_ablation_variants() if n in ABLATION4_CONFIGS else ():
            g = f4.Plan(s, f4.plan(s, sms, tc=True).parts, v.gemm).gemm
            try:
                f4.generator(g, v.gemm)
            except gemmgen.Unsupported:
                continue
            gemms.add((g, v.gemm))
    fused = [(s, parts, values) for n, s in resnet_configs() if n in ABLATION4_FUSED_CONFIGS
             for parts in f4fused_parts_on_known_gpus(s, "NCHW", sms) for values in f4fused_ablation_variants().values()]
    return sorted(gemms, key=str), fused


def prebuild_ablation4(args) -> int:
    """Assemble ablation4_jobs' kernels into the cache."""
    from concurrent.futures import ProcessPoolExecutor
    gemms, fused = ablation4_jobs(args.sms)
    t = time.time()
    with ProcessPoolExecutor(max_workers=args.jobs or os.cpu_count()) as ex:
        list(ex.map(_build_f4fused_job, [(o, g, None) for g, o in gemms]))
        list(ex.map(_build_f4fused_variant, fused))
    log(f"[prebuild] {len(gemms)} F(4x4,3x3) 3xTF32 GEMMs and {len(fused)} fused F(4x4,3x3) kernels of the "
        f"ablation in {time.time() - t:.1f}s")
    return 0


def _build_f4fused_variant(job):
    """A fused kernel (NCHW) with f4fused's constants set as the ablation variant says."""
    from . import f4fused
    from .f4fused_placement import constants
    s, parts, values = job
    with constants(values):
        f4fused.build(s, parts)


def _build_f4fused_job(job):
    from . import f4, f4fused, gemmgen, tcgemm
    what, s, sms = job
    if isinstance(what, tuple):         # the fused kernel's parts and layout
        f4fused.build(s, *what)
    elif isinstance(what, (gemmgen.GemmOptions, tcgemm.TcOptions)):
        f4.module(what).build(s, what)
    else:
        _build((s, what, sms))


def _build(job):
    from . import cubins, f4, gemmgen, plan
    s, o, sms = job
    if isinstance(s, gemmgen.GemmShape):
        f4.module(o).build(s, o)
    else:
        cubins.build(s, plan.resolve(s, o, sms))
