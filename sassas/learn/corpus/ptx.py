"""PTX generators: small kernels that each exercise a family of instructions.

Every snippet reads its inputs from global memory and stores its result, so ptxas keeps it.
Inputs available to a snippet (loaded per thread):
  %a %b %c : .b32      %x %y %z : .f32      %da %db %dc : .f64
  %la %lb : .b64       %ha %hb : .b16       %pa : .pred (a < b)
  %ptr : .u64 global pointer to the thread's input   %sp : .u32 shared address
A snippet writes `%o` (declared with the snippet's output type).
"""
from __future__ import annotations

from typing import Iterable, Iterator

# (output type, PTX lines using the inputs above and writing %o)
Snippet = tuple[str, str]

_INT_TYPES = ("u32", "s32")


def _arith() -> list[Snippet]:
    s: list[Snippet] = []
    for t in _INT_TYPES + ("u64", "s64"):
        w = "b64" if "64" in t else "b32"
        a, b, c = ("%la", "%lb", "%la") if "64" in t else ("%a", "%b", "%c")
        for op in ("add", "sub", "min", "max"):
            s.append((w, f"{op}.{t} %o, {a}, {b};"))
            s.append((w, f"{op}.{t} %o, {a}, 77;"))
        s.append((w, f"mul.lo.{t} %o, {a}, {b};"))
        s.append((w, f"mul.hi.{t} %o, {a}, {b};"))
        s.append((w, f"mad.lo.{t} %o, {a}, {b}, {c};"))
        s.append((w, f"mad.lo.{t} %o, {a}, 12345, {c};"))
        s.append((w, f"div.{t} %o, {a}, {b};"))
        s.append((w, f"rem.{t} %o, {a}, {b};"))
        for sh in ("shl.b", "shr.u", "shr.s"):
            s.append((w, f"{sh}{t[1:]} %o, {a}, %c;" if "64" not in t else f"{sh}64 %o, {a}, %c;"))
            s.append((w, f"{sh}{t[1:]} %o, {a}, 5;" if "64" not in t else f"{sh}64 %o, {a}, 37;"))
        s.append((w, f"abs.{t.replace('u', 's')} %o, {a};"))
        s.append((w, f"neg.{t.replace('u', 's')} %o, {a};"))
    for t in ("u32", "s32"):
        s.append(("b64", f"mul.wide.{t} %o, %a, %b;"))
        s.append(("b64", f"mul.wide.{t} %o, %a, 24;"))
        s.append(("b64", f"mad.wide.{t} %o, %a, %b, %la;"))
        s.append(("b32", f"mad.hi.{t} %o, %a, %b, %c;"))
        s.append(("b32", f"mul24.lo.{t} %o, %a, %b;"))
        s.append(("b32", f"sad.{t} %o, %a, %b, %c;"))
    for op in ("and", "or", "xor"):
        s.append(("b32", f"{op}.b32 %o, %a, %b;"))
        s.append(("b32", f"{op}.b32 %o, %a, 0xff00ff;"))
        s.append(("b64", f"{op}.b64 %o, %la, %lb;"))
    s += [("b32", "not.b32 %o, %a;"), ("b32", "lop3.b32 %o, %a, %b, %c, 0x96;"),
          ("b32", "lop3.b32 %o, %a, %b, 0xf0f0, 0xe8;"),
          ("b32", "popc.b32 %o, %a;"), ("b32", "clz.b32 %o, %a;"), ("b32", "brev.b32 %o, %a;"),
          ("b32", "bfind.u32 %o, %a;"), ("b32", "bfind.s32 %o, %a;"), ("b32", "bfind.shiftamt.u32 %o, %a;"),
          ("b32", "bfe.u32 %o, %a, %b, %c;"), ("b32", "bfe.s32 %o, %a, 3, 7;"),
          ("b32", "bfi.b32 %o, %a, %b, %c, 5;"), ("b32", "prmt.b32 %o, %a, %b, 0x3210;"),
          ("b32", "prmt.b32 %o, %a, %b, %c;"), ("b32", "prmt.b32.f4e %o, %a, %b, %c;"),
          ("b32", "shf.l.wrap.b32 %o, %a, %b, %c;"), ("b32", "shf.r.clamp.b32 %o, %a, %b, 7;"),
          ("b32", "shf.r.wrap.b32 %o, %a, %b, %c;"),
          ("b32", "add.cc.u32 %o, %a, %b; addc.u32 %o, %o, %c;"),
          ("b32", "sub.cc.u32 %o, %a, %b; subc.u32 %o, %o, %c;"),
          ("b32", "dp4a.u32.u32 %o, %a, %b, %c;"), ("b32", "dp2a.lo.s32.s32 %o, %a, %b, %c;"),
          ("b32", "add.sat.s32 %o, %a, %b;"), ("b32", "sub.sat.s32 %o, %a, %b;"),
          ("b32", "mov.b32 %o, 0x3f800000;"), ("b32", "mov.b32 %o, %a;"),
          ("b32", "selp.b32 %o, %a, %b, %pa;"), ("b32", "selp.b32 %o, %a, 9, %pa;"),
          ("b64", "selp.b64 %o, %la, %lb, %pa;"),
          ("b32", "slct.s32.s32 %o, %a, %b, %c;"), ("b32", "slct.f32.s32 %o, %x, %y, %c;"),
          ("b32", "testp.finite.f32 %p9, %x; selp.b32 %o, 1, 0, %p9;"),
          ("b32", "copysign.f32 %o, %x, %y;"),
          ("b32", "szext.wrap.u32 %o, %a, %b;") ]
    # Idioms of compiled code: signed division by powers of two, sign-extended indexing,
    # 64-bit zeros, bf16 -> f32 as a shift by 16.
    s += [("b32", "div.s32 %o, %a, 32;"), ("b32", "rem.s32 %o, %a, 16;"),
          ("b32", "shr.s32 %t1, %a, 5; add.s32 %o, %t1, %a;"),
          ("b64", "cvt.s64.s32 %lb, %a; shl.b64 %lb, %lb, 2; add.s64 %o, %la, %lb;"),
          ("b64", "mov.b64 %lb, 0; @%pa add.s64 %lb, %la, 5; mov.b64 %o, %lb;"),
          ("b32", "shl.b32 %o, %a, 16;"), ("b32", "mul.lo.u32 %o, %a, 65536;"),
          ("b32", "mad.lo.u32 %o, %a, 1, %b;"), ("b32", "mad.lo.s32 %o, %a, 8, %b;")]
    return s


def _float() -> list[Snippet]:
    s: list[Snippet] = []
    for rnd in ("", ".rn", ".rz", ".rm", ".rp"):
        for ftz in ("", ".ftz"):
            s.append(("f32", f"add{rnd}{ftz}.f32 %o, %x, %y;"))
            s.append(("f32", f"mul{rnd}{ftz}.f32 %o, %x, %y;"))
            s.append(("f32", f"fma{rnd or '.rn'}{ftz}.f32 %o, %x, %y, %z;"))
            s.append(("f32", f"fma{rnd or '.rn'}{ftz}.sat.f32 %o, %x, 0f3F000000, %z;"))
            s.append(("f32", f"sub{rnd}{ftz}.f32 %o, %x, 0f40490FDB;"))
        s.append(("f64", f"add{rnd}.f64 %o, %da, %db;"))
        s.append(("f64", f"mul{rnd}.f64 %o, %da, 0d3FF8000000000000;"))
        s.append(("f64", f"fma{rnd or '.rn'}.f64 %o, %da, %db, %dc;"))
    for ftz in ("", ".ftz"):
        s += [("f32", f"min{ftz}.f32 %o, %x, %y;"), ("f32", f"max{ftz}.f32 %o, %x, %y;"),
              ("f32", f"abs{ftz}.f32 %o, %x;"), ("f32", f"neg{ftz}.f32 %o, %x;"),
              ("f32", f"sqrt.approx{ftz}.f32 %o, %x;"), ("f32", f"rsqrt.approx{ftz}.f32 %o, %x;"),
              ("f32", f"rcp.approx{ftz}.f32 %o, %x;"), ("f32", f"sin.approx{ftz}.f32 %o, %x;"),
              ("f32", f"cos.approx{ftz}.f32 %o, %x;"), ("f32", f"ex2.approx{ftz}.f32 %o, %x;"),
              ("f32", f"lg2.approx{ftz}.f32 %o, %x;"), ("f32", f"div.approx{ftz}.f32 %o, %x, %y;"),
              ("f32", f"div.full{ftz}.f32 %o, %x, %y;"), ("f32", f"sqrt.rn{ftz}.f32 %o, %x;"),
              ("f32", f"rcp.rn{ftz}.f32 %o, %x;"), ("f32", f"div.rn{ftz}.f32 %o, %x, %y;"),
              ("f32", f"tanh.approx.f32 %o, %x;"), ("f32", f"ex2.approx.ftz.f32 %o, -%x;"),
              ("f32", f"mul{ftz}.f32 %o, %x, 0f7F800000;"), ("f32", f"add{ftz}.f32 %o, %x, 0fFF800000;"),
              ("f32", f"mul{ftz}.f32 %o, %x, 0f7FFFFFFF;"), ("f32", f"add{ftz}.f32 %o, %x, 0f00000001;"),
              ("f32", f"add{ftz}.f32 %o, %x, 0f4B189680;"), ("f32", f"add{ftz}.f32 %o, %x, 0f2EDBE6FF;")]
    s += [("f64", "sqrt.rn.f64 %o, %da;"), ("f64", "rcp.rn.f64 %o, %da;"), ("f64", "div.rn.f64 %o, %da, %db;"),
          ("f64", "rsqrt.approx.f64 %o, %da;"), ("f64", "rcp.approx.ftz.f64 %o, %da;"),
          ("f64", "min.f64 %o, %da, %db;"), ("f64", "max.f64 %o, %da, %db;"), ("f64", "abs.f64 %o, %da;"),
          ("f64", "neg.f64 %o, %da;"),
          ("f32", "min.NaN.f32 %o, %x, %y;"), ("f32", "max.xorsign.abs.f32 %o, %x, %y;"),
          ("b32", "add.rn.f16x2 %o, %a, %b;"), ("b32", "mul.rn.f16x2 %o, %a, %b;"),
          # one second source read back to back: the reuse slot ptxas gives it (HADD2: C's)
          ("b32", "add.rn.f16x2 %t1, %a, %c; add.rn.f16x2 %t2, %b, %c; add.rn.f16x2 %t3, %t1, %c; "
                  "add.rn.f16x2 %t1, %t2, %c; xor.b32 %o, %t1, %t3;"),
          ("b32", "fma.rn.f16x2 %o, %a, %b, %c;"), ("b32", "fma.rn.relu.f16x2 %o, %a, %b, %c;"),
          ("b32", "min.f16x2 %o, %a, %b;"), ("b32", "max.NaN.f16x2 %o, %a, %b;"),
          ("b32", "add.rn.bf16x2 %o, %a, %b;"), ("b32", "fma.rn.bf16x2 %o, %a, %b, %c;"),
          ("b32", "ex2.approx.f16x2 %o, %a;"), ("b32", "tanh.approx.f16x2 %o, %a;"),
          ("b16", "add.f16 %o, %ha, %hb;"), ("b16", "fma.rn.f16 %o, %ha, %hb, %ha;"),
          ("b16", "neg.f16 %o, %ha;"), ("b16", "abs.f16 %o, %ha;")]
    return s


def _cvt() -> list[Snippet]:
    s: list[Snippet] = []
    ints = {"u8": "b32", "s8": "b32", "u16": "b32", "s16": "b32", "u32": "b32", "s32": "b32",
            "u64": "b64", "s64": "b64"}
    src = {"b32": "%a", "b64": "%la", "f32": "%x", "f64": "%da", "f16": "%ha"}
    for it, iw in ints.items():
        reg_in = "%la" if iw == "b64" else "%a"
        if it in ("u8", "s8", "u16", "s16"):
            reg_t = {"u8": "u32", "s8": "s32", "u16": "u32", "s16": "s32"}[it]
            s.append(("b32", f"cvt.{reg_t}.{it} %o, %a;"))
            s.append(("b32", f"cvt.sat.{it}.s32 %o, %a;"))
        for ft, fw in (("f32", "f32"), ("f64", "f64"), ("f16", "b16")):
            for rnd in ("rn", "rz", "rm", "rp"):
                iregt = it if iw == "b64" or it in ("u32", "s32") else None
                if iregt:
                    s.append((fw, f"cvt.{rnd}.{ft}.{it} %o, {reg_in};"))
                    s.append((iw, f"cvt.{rnd}i.{it}.{ft} %o, {src[fw if fw != 'b16' else 'f16']};"))
        if it in ("u32", "s32", "u64", "s64"):
            s.append((iw, f"cvt.rzi.sat.{it}.f32 %o, %x;"))
    for rnd in ("rn", "rz", "rm", "rp"):
        s.append(("f32", f"cvt.{rnd}.f32.f64 %o, %da;"))
        s.append(("f32", f"cvt.{rnd}i.f32.f32 %o, %x;"))
        s.append(("f64", f"cvt.{rnd}i.f64.f64 %o, %da;"))
        s.append(("b16", f"cvt.{rnd}.f16.f32 %o, %x;"))
    s += [("f64", "cvt.f64.f32 %o, %x;"), ("f32", "cvt.f32.f16 %o, %ha;"),
          ("f32", "cvt.ftz.sat.f32.f32 %o, %x;"), ("b32", "cvt.rn.f16x2.f32 %o, %x, %y;"),
          ("b32", "cvt.rn.bf16x2.f32 %o, %x, %y;"), ("b16", "cvt.rn.bf16.f32 %o, %x;"),
          ("b16", "cvt.rm.bf16.f32 %o, %x;"), ("b16", "cvt.rn.bf16.f16 %o, %ha;"),
          ("b32", "cvt.rna.tf32.f32 %o, %x;"), ("b32", "cvt.rn.relu.f16x2.f32 %o, %x, %y;"),
          ("b32", "cvt.u32.u64 %o, %la;"), ("b64", "cvt.s64.s32 %o, %a;"), ("b64", "cvt.u64.u32 %o, %a;"),
          ("b32", "cvt.s8.s32 %o, %a;"), ("b32", "cvt.u16.u32 %o, %a;")]
    return s


def _setp() -> list[Snippet]:
    s: list[Snippet] = []
    for t, a, b in (("s32", "%a", "%b"), ("u32", "%a", "%b"), ("s64", "%la", "%lb"),
                    ("u64", "%la", "%lb"), ("f32", "%x", "%y"), ("f64", "%da", "%db")):
        cmps = ("eq", "ne", "lt", "le", "gt", "ge")
        if t[0] == "f":
            cmps += ("equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")
        for cmp in cmps:
            s.append(("b32", f"setp.{cmp}.{t} %p9, {a}, {b}; selp.b32 %o, %a, %c, %p9;"))
        s.append(("b32", f"setp.lt.and.{t} %p9, {a}, {b}, %pa; selp.b32 %o, %a, %c, %p9;"))
        s.append(("b32", f"setp.ge.or.{t} %p9, {a}, {b}, %pa; selp.b32 %o, %a, %c, %p9;"))
        s.append(("b32", f"setp.ne.xor.{t} %p9|%p8, {a}, {b}, !%pa; selp.b32 %o, %a, %c, %p9; "
                         f"selp.b32 %o, %o, 3, %p8;"))
        s.append(("b32", f"set.gt.u32.{t} %o, {a}, {b};"))
        imm = {"f32": "0f3F800000", "f64": "0d3FF0000000000000"}.get(t, "17")
        s.append(("b32", f"setp.le.{t} %p9, {a}, {imm}; selp.b32 %o, %a, %c, %p9;"))
    s.append(("b32", "setp.eq.u32 %p9, %a, 0; setp.ne.and.u32 %p8, %b, 0, %p9; "
                     "@%p8 mov.b32 %c, 7; mov.b32 %o, %c;"))
    s.append(("f32", "set.lt.ftz.f32.f32 %o, %x, %y;"))
    s.append(("b32", "setp.gt.f16x2 %p9|%p8, %a, %b; selp.b32 %o, %a, %c, %p9; selp.b32 %o, %o, 1, %p8;"))
    return s


def _special() -> list[Snippet]:
    regs32 = ("%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z", "%ctaid.x", "%ctaid.y",
              "%ctaid.z", "%nctaid.x", "%nctaid.y", "%laneid", "%warpid", "%nwarpid", "%smid",
              "%nsmid", "%gridid", "%lanemask_eq", "%lanemask_lt", "%lanemask_le", "%lanemask_gt",
              "%lanemask_ge", "%clock", "%dynamic_smem_size", "%total_smem_size", "%pm0",
              "%envreg0", "%clusterid.x", "%cluster_ctaid.x", "%cluster_nctarank", "%cluster_ctarank",
              "%is_explicit_cluster")
    s = [("b32", f"mov.u32 %o, {r};") for r in regs32]
    s += [("b64", "mov.u64 %o, %clock64;"), ("b64", "mov.u64 %o, %globaltimer;"),
          ("b32", "mov.u32 %o, %clock_hi;"), ("b64", "mov.u64 %o, %gridid;")]
    return s


def _warp() -> list[Snippet]:
    s: list[Snippet] = []
    for mode in ("up", "down", "bfly", "idx"):
        s.append(("b32", f"shfl.sync.{mode}.b32 %o, %a, %b, 0x1f, 0xffffffff;"))
        s.append(("b32", f"shfl.sync.{mode}.b32 %o, %a, 3, %c, 0xffffffff;"))
        s.append(("b32", f"shfl.sync.{mode}.b32 %o|%p9, %a, 1, 0x1f, %b; selp.b32 %o, %o, 2, %p9;"))
    s += [("b32", "vote.sync.ballot.b32 %o, %pa, 0xffffffff;"),
          ("b32", "vote.sync.all.pred %p9, %pa, 0xffffffff; selp.b32 %o, 1, 2, %p9;"),
          ("b32", "vote.sync.any.pred %p9, !%pa, %c; selp.b32 %o, 1, 2, %p9;"),
          ("b32", "vote.sync.uni.pred %p9, %pa, 0xffffffff; selp.b32 %o, 1, 2, %p9;"),
          ("b32", "match.any.sync.b32 %o, %a, 0xffffffff;"),
          ("b32", "match.all.sync.b32 %o|%p9, %a, 0xffffffff; selp.b32 %o, %o, 2, %p9;"),
          ("b32", "match.any.sync.b64 %o, %la, 0xffffffff;"),
          ("b32", "activemask.b32 %o;"),
          ("b32", "redux.sync.add.u32 %o, %a, 0xffffffff;"),
          ("b32", "redux.sync.max.s32 %o, %a, 0xffffffff;"),
          ("b32", "redux.sync.and.b32 %o, %a, 0xffffffff;"),
          ("b32", "bar.warp.sync 0xffffffff; mov.b32 %o, %a;"),
          ("b32", "fns.b32 %o, %a, %b, 1;")]
    return s


def _memory() -> list[Snippet]:
    s: list[Snippet] = []
    widths = (("u8", "b32", "cvt.u32.u8"), ("s8", "b32", None), ("u16", "b32", None),
              ("s16", "b32", None), ("b32", "b32", None), ("b64", "b64", None))
    for ty, ow, _ in widths:
        for cop in ("", ".ca", ".cg", ".cs", ".lu", ".cv"):
            s.append((ow, f"ld.global{cop}.{ty} %o, [%ptr+16];"))
        s.append((ow, f"ld.global.nc.{ty} %o, [%ptr+8];"))
        s.append((ow, f"ld.shared.{ty} %o, [%sp+4];"))
        s.append((ow, f"ld.volatile.global.{ty} %o, [%ptr];"))
        s.append((ow, f"ld.const.{ty} %o, [cst+4];"))
        s.append((ow, f"ld.local.{ty} %o, [loc+8];"))
        s.append((ow, f"ld.{ty} %o, [%ptr+32];"))
        reg = "%la" if ow == "b64" else "%a"
        s.append((ow, f"st.global.{ty} [%ptr+64], {reg}; mov.b{ow[1:]} %o, {reg};"))
        s.append((ow, f"st.shared.{ty} [%sp+8], {reg}; mov.b{ow[1:]} %o, {reg};"))
        s.append((ow, f"st.global.cs.{ty} [%ptr+4], {reg}; mov.b{ow[1:]} %o, {reg};"))
        s.append((ow, f"st.local.{ty} [loc+12], {reg}; ld.local.{ty} %o, [loc+4];"))
    for sem in (".relaxed.gpu", ".acquire.gpu", ".relaxed.sys", ".acquire.cta", ".relaxed.cluster"):
        s.append(("b32", f"ld{sem}.global.b32 %o, [%ptr];"))
    for sem in (".relaxed.gpu", ".release.gpu", ".release.sys", ".relaxed.cta"):
        s.append(("b32", f"st{sem}.global.b32 [%ptr+4], %a; mov.b32 %o, %b;"))
    s += [("b32", "ld.global.v2.b32 {%o, %t1}, [%ptr+8]; add.u32 %o, %o, %t1;"),
          ("b32", "ld.global.v4.b32 {%o, %t1, %t2, %t3}, [%ptr]; add.u32 %o, %o, %t3;"),
          ("b32", "ld.shared.v2.b32 {%o, %t1}, [%sp+8]; add.u32 %o, %o, %t1;"),
          ("b32", "ld.shared.v4.b32 {%o, %t1, %t2, %t3}, [%sp+16]; add.u32 %o, %o, %t3;"),
          ("b32", "ld.global.nc.v4.b32 {%o, %t1, %t2, %t3}, [%ptr+48]; add.u32 %o, %o, %t3;"),
          ("b32", "ld.global.L1::no_allocate.b32 %o, [%ptr];"),
          ("b32", "ld.global.L2::128B.b32 %o, [%ptr];"),
          ("b32", "ld.global.nc.L1::evict_last.b32 %o, [%ptr];"),
          ("b32", "st.shared.v4.b32 [%sp], {%a, %b, %c, %a}; mov.b32 %o, %b;"),
          ("b32", "st.global.v4.b32 [%ptr+16], {%a, %b, %c, %a}; mov.b32 %o, %b;"),
          ("b32", "st.shared.v2.b32 [%sp+8], {%a, %b}; mov.b32 %o, %b;"),
          ("b32", "st.global.v2.b32 [%ptr+8], {%a, %b}; mov.b32 %o, %b;"),
          ("b32", "ld.shared.b32 %o, [%sp+-64];"),
          ("b32", "ld.shared.b32 %o, [%a];"),
          ("b32", "ld.global.b32 %o, [%ptr+-1024];"),
          ("b32", "ldu.global.b32 %o, [%ptr];"),
          ("b32", "prefetch.global.L2 [%ptr]; mov.b32 %o, %a;"),
          # Absolute shared addresses (STS [0x210]), uniform global addresses ([UR4+0x10]) and
          # a register base plus a uniform offset ([R2.64+UR4+0x100]).
          ("b32", "st.shared.u32 [smem+528], %a; bar.sync 0; ld.shared.u32 %o, [smem+532];"),
          ("b32", "ld.param.u64 %lb, [p_out]; cvta.to.global.u64 %lb, %lb; ld.global.u32 %o, [%lb+16];"),
          ("b32", "ld.param.u64 %lb, [p_out]; add.s64 %lb, %ptr, %lb; ld.global.u32 %o, [%lb];"),
          ("b32", "ld.param.u64 %lb, [p_out]; add.s64 %lb, %ptr, %lb; ld.global.nc.u16 %o, [%lb+256];"),
          ("b32", "cvta.to.shared.u32 %o, %sp; isspacep.shared %p9, %la; selp.b32 %o, %o, 1, %p9;"),
          ("b32", "membar.gl; mov.b32 %o, %a;"), ("b32", "membar.cta; mov.b32 %o, %a;"),
          ("b32", "membar.sys; mov.b32 %o, %a;"), ("b32", "fence.acq_rel.gpu; mov.b32 %o, %a;"),
          ("b32", "fence.sc.cta; mov.b32 %o, %a;"), ("b32", "fence.proxy.async; mov.b32 %o, %a;")]
    return s


def _atomics() -> list[Snippet]:
    s: list[Snippet] = []
    for space, addr in (("global", "%ptr"), ("shared", "%sp")):
        for op, ty in (("add", "u32"), ("add", "s32"), ("min", "u32"), ("max", "s32"), ("and", "b32"),
                       ("or", "b32"), ("xor", "b32"), ("exch", "b32"), ("inc", "u32"), ("dec", "u32"),
                       ("add", "f32"), ("add", "u64"), ("min", "s64"), ("exch", "b64"),
                       ("add", "f64"), ("add.noftz", "f16x2"), ("max", "u64")):
            ow = "b64" if "64" in ty else "b32"
            src = "%la" if ow == "b64" else ("%x" if ty == "f32" else "%a")
            if ty == "f32":
                ow = "f32"
            if ty == "f64":
                ow, src = "f64", "%da"
            s.append((ow, f"atom.{space}.{op}.{ty} %o, [{addr}+8], {src};"))
            if ow in ("b32", "f32", "f64", "b64") and not op.startswith("exch"):
                s.append(("b32", f"red.{space}.{op}.{ty} [{addr}+4], {src}; mov.b32 %o, %b;"))
        s.append(("b32", f"atom.{space}.cas.b32 %o, [{addr}], %a, %b;"))
        s.append(("b64", f"atom.{space}.cas.b64 %o, [{addr}], %la, %lb;"))
    for sem in (".relaxed.gpu", ".acq_rel.sys", ".acquire.cta", ".release.gpu", ".relaxed.cluster"):
        s.append(("b32", f"atom{sem}.global.add.u32 %o, [%ptr], %a;"))
        s.append(("b32", f"red{sem}.global.add.u32 [%ptr], %a; mov.b32 %o, %b;"))
    s.append(("b32", "atom.global.add.u32 %o, [%ptr], 1;"))
    s.append(("b32", "red.global.add.u32 [%ptr], 1; mov.b32 %o, %b;"))
    return s


def _control() -> list[Snippet]:
    return [("b32", "mov.b32 %o, %a; @%pa bra L_skip_{n}; add.u32 %o, %o, %b; L_skip_{n}:"),
            ("b32", "mov.b32 %o, 0; mov.b32 %t1, %a; L_loop_{n}: add.u32 %o, %o, %t1; "
                    "sub.u32 %t1, %t1, 1; setp.ne.u32 %p9, %t1, 0; @%p9 bra L_loop_{n};"),
            ("b32", "bar.sync 0; mov.b32 %o, %a;"), ("b32", "bar.sync 1, 64; mov.b32 %o, %a;"),
            ("b32", "barrier.sync.aligned 2; mov.b32 %o, %a;"), ("b32", "bar.arrive 3, 64; mov.b32 %o, %a;"),
            ("b32", "bar.red.popc.u32 %o, 0, %pa;"),
            ("b32", "bar.red.and.pred %p9, 0, %pa; selp.b32 %o, 1, 2, %p9;"),
            ("b32", "nanosleep.u32 %a; mov.b32 %o, %b;"),
            ("b32", "mov.b32 %o, %a; @!%pa trap;"),
            ("b32", "mov.b32 %o, %a; @%pa exit;"),
            ("b32", "mov.b32 %o, %a; @%pa brkpt;"),
            ("b32", "pmevent 3; mov.b32 %o, %a;"),
            ("b32", "mov.pred %p9, %pa; and.pred %p8, %p9, %pa; or.pred %p9, %p8, !%pa; "
                    "xor.pred %p8, %p9, %pa; selp.b32 %o, %a, %b, %p8;"),
            ("b32", "getctarank.shared::cluster.u32 %o, %sp;"),
            ("b32", "elect.sync %o|%p9, 0xffffffff;")]


def _sm75(sm: int) -> list[Snippet]:
    """Turing's warp-level MMA of 8x8 tiles (IMMA.8816/.8832, BMMA.88128; its AND form from
    sm_80), which TuringAs files write as they are; ptxas keeps these shapes up to sm_90."""
    s: list[Snippet] = []
    for k, types in ((16, ("s8", "u8")), (32, ("s4", "u4"))):
        for a in types:
            for b in types:
                s.append(("b32", f"mma.sync.aligned.m8n8k{k}.row.col.s32.{a}.{b}.s32 {{%t1, %o}}, {{%a}}, {{%b}}, {{%c, %a}};"))
        s.append(("b32", f"mma.sync.aligned.m8n8k{k}.row.col.satfinite.s32.{types[0]}.{types[0]}.s32 "
                         "{%t1, %o}, {%a}, {%b}, {%c, %a};"))
    for op in ("xor", "and") if sm >= 80 else ("xor",):
        s.append(("b32", f"mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.{op}.popc {{%t1, %o}}, {{%a}}, {{%b}}, {{%c, %a}};"))
    return s


def _sm80() -> list[Snippet]:
    return [("b32", "cp.async.ca.shared.global [%sp], [%ptr], 4; cp.async.commit_group; "
                    "cp.async.wait_group 0; mov.b32 %o, %a;"),
            ("b32", "cp.async.cg.shared.global [%sp+16], [%ptr], 16; cp.async.wait_all; mov.b32 %o, %a;"),
            ("b32", "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%o}, [%sp];"),
            ("b32", "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%o, %t1, %t2, %t3}, [%sp]; add.u32 %o, %o, %t3;"),
            ("b32", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%t1, %t2, %t3, %o}, "
                    "{%a, %b, %c, %a}, {%b, %c}, {%a, %b, %c, %a};"),
            ("b32", "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%t1, %t2, %t3, %o}, "
                    "{%a, %b}, {%c}, {%a, %b, %c, %a};"),
            ("b32", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%t1, %t2, %t3, %o}, "
                    "{%a, %b, %c, %a}, {%b, %c}, {%a, %b, %c, %a};"),
            ("b32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%t1, %t2, %t3, %o}, "
                    "{%a, %b, %c, %a}, {%b, %c}, {%a, %b, %c, %a};"),
            ("f64", "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%o, %db}, {%da}, {%db}, {%da, %dc};"),
            ("b32", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%t1, %o}, "
                    "{%a, %b, %c, %a}, {%b, %c}, {%a, %b};"),
            ("b32", "mbarrier.init.shared.b64 [%sp], 32; mov.b32 %o, %a;"),
            # cp.async completion counted on an mbarrier at a fixed address: ARRIVES [UR+I]
            ("b32", "cp.async.mbarrier.arrive.noinc.shared.b64 [smem+8]; mov.b32 %o, %a;"),
            ("b64", "mbarrier.arrive.shared.b64 %o, [%sp];"),
            ("b32", "mbarrier.test_wait.shared.b64 %p9, [%sp], %la; selp.b32 %o, 1, 2, %p9;"),
            ("b32", "redux.sync.min.u32 %o, %a, 0xffffffff;"),
            # sparse MMA (HMMA.SP: its metadata register takes reuse slot 3, printed nowhere)
            ("b32", "mma.sp.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32 {%t1, %t2, %t3, %o}, "
                    "{%a, %b, %c, %a}, {%b, %c, %a, %b}, {%a, %b, %c, %a}, %c, 0x0;")]


def _sm90() -> list[Snippet]:
    return [("b32", "mbarrier.try_wait.parity.shared::cta.b64 %p9, [%sp], %a; selp.b32 %o, 1, 2, %p9;"),
            ("b32", "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%sp], 128; mov.b32 %o, %a;"),
            ("b32", "fence.proxy.async.shared::cta; mov.b32 %o, %a;"),
            ("b32", "barrier.cluster.arrive; barrier.cluster.wait; mov.b32 %o, %a;"),
            ("b32", "mapa.shared::cluster.u32 %o, %sp, %a;"),
            ("b32", "ld.shared::cluster.u32 %o, [%sp];"),
            ("b32", "griddepcontrol.wait; mov.b32 %o, %a;"),
            ("b32", "griddepcontrol.launch_dependents; mov.b32 %o, %a;"),
            ("b32", "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%sp], [%ptr], 256, [%sp]; mov.b32 %o, %a;"),
            ("b32", "cp.async.bulk.global.shared::cta.bulk_group [%ptr], [%sp], 256; cp.async.bulk.commit_group; "
                    "cp.async.bulk.wait_group.read 0; mov.b32 %o, %a;"),
            ("b32", "stmatrix.sync.aligned.m8n8.x1.shared.b16 [%sp], {%a}; mov.b32 %o, %b;"),
            # an mbarrier at a fixed shared address: its address in a uniform register
            ("b32", "mbarrier.try_wait.parity.shared::cta.b64 %p9, [smem+8], %a; selp.b32 %o, 1, 2, %p9;"),
            ("b32", "mbarrier.arrive.expect_tx.shared::cta.b64 _, [smem+8], 256; mov.b32 %o, %a;")]


def _sm90a() -> list[Snippet]:
    """The arch-specific features of sm_90 (`.target sm_90a`): warpgroup MMA and register
    reallocation, as FlashAttention-3-style code uses them."""
    wgmma = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%x, %y, %z, %o}, %la, %lb, 1, 1, 1, 0, 0; "
    return [("b32", "setmaxnreg.inc.sync.aligned.u32 232; mov.b32 %o, %a;"),
            ("b32", "setmaxnreg.dec.sync.aligned.u32 40; mov.b32 %o, %a;"),
            ("b32", "@%pa bra L_max_{n}; setmaxnreg.inc.sync.aligned.u32 240; L_max_{n}: mov.b32 %o, %a;"),
            ("f32", "wgmma.fence.sync.aligned; " + wgmma +
                    "wgmma.commit_group.sync.aligned; wgmma.wait_group.sync.aligned 0;"),
            # two groups in flight, the first waited for alone (WARPGROUP.DEPBAR.LE gsb0, 0x1)
            ("f32", "wgmma.fence.sync.aligned; " + wgmma + "wgmma.commit_group.sync.aligned; " +
                    wgmma.replace("%la, %lb", "%lb, %la") + "wgmma.commit_group.sync.aligned; "
                    "wgmma.wait_group.sync.aligned 1; add.f32 %o, %o, %x; wgmma.wait_group.sync.aligned 0;"),
            ("f32", "wgmma.fence.sync.aligned; "
                    "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%x, %y, %z, %o}, %la, %lb, 1, 1, 1; "
                    "wgmma.commit_group.sync.aligned; wgmma.wait_group.sync.aligned 0;"),
            ("f32", "wgmma.fence.sync.aligned; "
                    "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%x, %y, %z, %o}, %la, %lb, %pa, -1, 1, 1, 0; "
                    "wgmma.commit_group.sync.aligned; wgmma.wait_group.sync.aligned 0;"),
            # bulk and tensor copies (TMA: UBLKRED, UTMALDG, UTMASTG, UTMAREDG), %la a tensor map
            ("b32", "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%ptr], [%sp], 256; "
                    "cp.async.bulk.commit_group; cp.async.bulk.wait_group 0; mov.b32 %o, %a;"),
            ("b32", "cp.reduce.async.bulk.global.shared::cta.bulk_group.L2::cache_hint.add.f32 [%ptr], [%sp], 256, %lb; "
                    "cp.async.bulk.commit_group; cp.async.bulk.wait_group 0; mov.b32 %o, %a;"),
            ("b32", "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%sp], "
                    "[%la, {%a, %b}], [smem+8]; mov.b32 %o, %a;"),
            ("b32", "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%la, {%a, %b}], [%sp]; "
                    "cp.async.bulk.commit_group; cp.async.bulk.wait_group.read 0; mov.b32 %o, %a;"),
            ("b32", "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group [%la, {%a, %b}], [%sp]; "
                    "cp.async.bulk.commit_group; cp.async.bulk.wait_group 0; mov.b32 %o, %a;")]


def _sm100() -> list[Snippet]:
    """What every Blackwell target has (sm_100 and sm_120 alike): the newer barrier, bulk-copy,
    conversion and redux forms that ptxas 12.9 accepts without an arch-specific target."""
    return [("b32", "cvt.rn.satfinite.e4m3x2.f32 %ha, %x, %y; cvt.u32.u16 %o, %ha;"),
            ("b32", "cvt.rn.satfinite.e5m2x2.f32 %ha, %x, %y; cvt.u32.u16 %o, %ha;"),
            ("b32", "cvt.rn.f16x2.e4m3x2 %o, %ha;"),
            ("b32", "cvt.rn.bf16x2.f32 %o, %x, %y;"),
            ("b32", "cvt.rn.satfinite.relu.bf16x2.f32 %o, %x, %y;"),
            ("b32", "mbarrier.arrive.release.cluster.shared::cta.b64 _, [%sp]; mov.b32 %o, %a;"),
            ("b32", "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p9, [%sp], %a; selp.b32 %o, 1, 2, %p9;"),
            ("b32", "fence.proxy.async.global; mov.b32 %o, %a;"),
            ("b32", "fence.acq_rel.cluster; mov.b32 %o, %a;"),
            ("b32", "cp.async.bulk.prefetch.L2.global [%ptr], 256; mov.b32 %o, %a;"),
            ("b32", "multimem.ld_reduce.relaxed.sys.global.add.u32 %o, [%ptr];"),
            ("b32", "st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%sp], %a, [%sp+8]; mov.b32 %o, %a;"),
            ("b32", "elect.sync %t1|%p9, 0xffffffff; selp.b32 %o, %t1, 2, %p9;"),
            ("b32", "activemask.b32 %o;"),
            ("b32", "mov.u32 %o, %clusterid.x;"),
            ("b32", "mov.u32 %o, %cluster_ctarank;"),
            ("f32", "ex2.approx.ftz.f32 %o, %x;"),
            ("b32", "ex2.approx.ftz.bf16x2 %o, %a;"),
            ("b32", "fma.rn.f32x2 %la, %la, %lb, %la; mov.b64 {%o, %t1}, %la;"),
            ("b32", "add.rn.f32x2 %la, %la, %lb; mov.b64 {%o, %t1}, %la;"),
            ("b32", "mul.rn.f32x2 %la, %la, %lb; mov.b64 {%o, %t1}, %la;"),
            ("b32", "ld.global.L2::256B.v8.f32 {%x, %y, %z, %o, %x, %y, %z, %o}, [%ptr];"),
            ("b32", "st.global.v8.f32 [%ptr], {%x, %y, %z, %x, %y, %z, %x, %y}; mov.b32 %o, %a;"),
            ("b32", "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%sp], [%sp+16]; "
                    "mov.b32 %o, %a;"),
            # A parameter clamped, and one packed to f16x2, where they are: in uniform registers
            # (sm_120's `UVIMNMX.U32 UR4, UR4, 0x7fffffff, UPT`, `F2FP.F16.F32.PACK_AB R5, RZ, UR6`).
            ("b32", "ld.param.u32 %t1, [p_n]; min.u32 %t1, %t1, 2147483647; add.u32 %o, %a, %t1;"),
            ("b32", "ld.param.u32 %t1, [p_n]; mov.b32 %x, %t1; mov.f32 %y, 0f00000000; cvt.rn.f16x2.f32 %o, %y, %x;")]


def _sm100a() -> list[Snippet]:
    """The arch-specific features of sm_100 (`.target sm_100a`): tensor memory (tcgen05),
    its MMA (UTCMMA), copies and the commit to an mbarrier, as CUTLASS's Blackwell kernels
    use them. Addresses: %sp a shared address, %a a tensor-memory address."""
    return [("b32", "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%sp], 32; "
                    "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned; mov.b32 %o, %a;"),
            ("b32", "tcgen05.dealloc.cta_group::1.sync.aligned.b32 %a, 32; mov.b32 %o, %b;"),
            ("b32", "tcgen05.ld.sync.aligned.32x32b.x1.b32 {%o}, [%a]; tcgen05.wait::ld.sync.aligned;"),
            ("b32", "tcgen05.ld.sync.aligned.16x64b.x2.b32 {%o, %t1}, [%a]; tcgen05.wait::ld.sync.aligned; add.u32 %o, %o, %t1;"),
            ("b32", "tcgen05.st.sync.aligned.32x32b.x1.b32 [%a], {%b}; tcgen05.wait::st.sync.aligned; mov.b32 %o, %c;"),
            ("b32", "tcgen05.mma.cta_group::1.kind::f16 [%a], %la, %lb, %b, %pa; mov.b32 %o, %c;"),
            ("b32", "tcgen05.mma.cta_group::1.kind::tf32 [%a], [%b], %lb, %c, %pa; mov.b32 %o, %c;"),
            ("b32", "tcgen05.mma.cta_group::1.kind::f8f6f4 [%a], %la, %lb, %b, %pa; mov.b32 %o, %c;"),
            ("b32", "tcgen05.mma.cta_group::1.kind::i8 [%a], %la, %lb, %b, %pa; mov.b32 %o, %c;"),
            ("b32", "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%sp]; mov.b32 %o, %a;"),
            ("b32", "tcgen05.fence::before_thread_sync; tcgen05.fence::after_thread_sync; mov.b32 %o, %a;"),
            ("b32", "tcgen05.cp.cta_group::1.128x256b [%a], %la; mov.b32 %o, %b;"),
            ("b32", "tcgen05.shift.cta_group::1.down [%a]; mov.b32 %o, %b;"),
            ("b32", "cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4.mbarrier::complete_tx::bytes [%sp], "
                    "[%la, {%a, %b, %c, %a, %b}], [smem+8]; mov.b32 %o, %a;"),
            ("b32", "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.cta_group::1 [%sp], "
                    "[%la, {%a, %b}], [smem+8]; mov.b32 %o, %a;"),
            ("f32", "redux.sync.max.f32 %o, %x, 0xffffffff;"),
            ("f32", "redux.sync.min.abs.NaN.f32 %o, %x, 0xffffffff;"),
            ("b32", "setmaxnreg.inc.sync.aligned.u32 232; mov.b32 %o, %a;"),
            ("b32", "setmaxnreg.dec.sync.aligned.u32 40; mov.b32 %o, %a;")]


def _sm120a() -> list[Snippet]:
    """The arch-specific features of sm_120 (`.target sm_120a`): the warp-level MMA forms for
    FP8/FP6/FP4 with and without block scales (OMMA/QMMA), as ptxas 12.9 emits them."""
    acc = "{%t1, %t2, %t3, %o}"
    a4, b2, c4 = "{%a, %b, %c, %a}", "{%b, %c}", "{%a, %b, %c, %a}"
    return [("b32", f"mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32 {acc}, {a4}, {b2}, {c4};"),
            ("b32", f"mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e2m1.f32 {acc}, {a4}, {b2}, {c4};"),
            ("b32", f"mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f16.e5m2.e4m3.f16 {{%t1, %o}}, {a4}, {b2}, {{%a, %b}};"),
            ("b32", f"mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e3m2.e2m3.f32 {acc}, {a4}, {b2}, {c4};"),
            ("b32", f"mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0 "
                    f"{acc}, {a4}, {b2}, {c4}, %a, {{0, 0}}, %b, {{0, 0}};"),
            ("b32", f"mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0 "
                    f"{acc}, {a4}, {b2}, {c4}, %a, {{0, 0}}, %b, {{0, 0}};"),
            ("b32", f"mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3 "
                    f"{acc}, {a4}, {b2}, {c4}, %a, {{0, 0}}, %b, {{0, 0}};"),
            ("b32", "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32 "
                    f"{acc}, {a4}, {{%b, %c, %a, %b}}, {c4}, %c, 0x0;"),
            ("b32", "ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {%o, %t1}, [%sp]; add.u32 %o, %o, %t1;"),
            ("b32", "ldmatrix.sync.aligned.m8n16.x1.shared.b8x16.b6x16_p32 {%o}, [%sp];"),
            ("b32", "stmatrix.sync.aligned.m16n8.x1.trans.shared.b8 [%sp], {%a}; mov.b32 %o, %b;")]


def _uniform() -> list[Snippet]:
    """Kernel parameters used directly: ptxas keeps them in uniform registers (ULDC, UR operands)."""
    ld = "ld.param.u32 %t1, [p_n]; "
    return [("b32", ld + "setp.ge.u32 %p9, %a, %t1; selp.b32 %o, %a, %b, %p9;"),
            ("b32", ld + "setp.lt.s32 %p9, %a, %t1; selp.b32 %o, %a, %b, %p9;"),
            ("b32", ld + "add.u32 %o, %a, %t1;"), ("b32", ld + "mad.lo.u32 %o, %a, %t1, %b;"),
            ("b32", ld + "and.b32 %o, %a, %t1;"), ("b32", ld + "shl.b32 %o, %a, %t1;"),
            ("b32", ld + "mov.b32 %x, %t1; fma.rn.f32 %x, %x, %y, %z; mov.b32 %o, %x;"),
            ("b32", ld + "mov.b32 %x, %t1; add.f32 %x, %y, %x; mov.b32 %o, %x;"),
            ("b32", ld + "min.s32 %o, %a, %t1;"), ("b64", ld + "mul.wide.u32 %o, %a, %t1;"),
            ("b32", ld + "setp.ne.u32 %p9, %t1, 0; @%p9 bra L_u_{n}; mov.b32 %a, 3; L_u_{n}: mov.b32 %o, %a;"),
            ("b64", "ld.param.u64 %o, [p_out]; add.s64 %o, %o, %la;"),
            # Arithmetic on parameters alone stays in the uniform datapath (UIADD3, UIMAD,
            # UISETP, ULEA, USEL); a sign-extended index into a parameter pointer.
            ("b32", ld + "add.u32 %t2, %t1, 4096; mul.lo.u32 %t2, %t2, %t1; add.u32 %o, %a, %t2;"),
            ("b32", ld + "setp.lt.u32 %p9, %t1, 0x7fffffff; @%p9 add.u32 %t1, %t1, 1; add.u32 %o, %a, %t1;"),
            ("b32", ld + "shl.b32 %t2, %t1, 2; add.u32 %t2, %t2, %t1; add.u32 %o, %a, %t2;"),
            ("b32", ld + "mad.lo.u32 %t2, %t1, 3, 7; add.u32 %o, %a, %t2;"),
            ("b32", ld + "sub.u32 %t2, 0, %t1; xor.b32 %t2, %t2, %t1; add.u32 %o, %a, %t2;"),
            ("b64", "ld.param.u64 %o, [p_out]; cvt.s64.s32 %lb, %a; shl.b64 %lb, %lb, 2; add.s64 %o, %o, %lb;")]


def _idioms() -> list[Snippet]:
    """What compiled CUDA C does that the families above miss: multiplications by constants
    (hashing, division by a constant: IMAD.HI with an immediate), and atomics, loads and
    stores through a kernel parameter's pointer alone, whose address ptxas keeps in a uniform
    register pair (`RED.E.ADD.F32.FTZ.RN.STRONG.GPU [UR4], R7`)."""
    s: list[Snippet] = []
    for t in _INT_TYPES:
        s.append(("b32", f"mul.hi.{t} %o, %a, 0x9e3779b9;"))
        s.append(("b32", f"mad.hi.{t} %o, %a, 0x92492493, %b;"))
        s.append(("b32", f"div.{t} %o, %a, 7;"))
        s.append(("b32", f"rem.{t} %o, %a, 10;"))
    param = ".reg .b64 %q; ld.param.u64 %q, [p_out]; cvta.to.global.u64 %q, %q; "
    s += [("b32", param + "red.global.add.f32 [%q], %x; mov.b32 %o, %a;"),
          ("b32", param + "red.global.add.u32 [%q+8], %a; mov.b32 %o, %b;"),
          ("b32", param + "red.global.add.u64 [%q+16], %la; mov.b32 %o, %b;"),
          ("b32", param + "red.global.min.s32 [%q+4], %a; mov.b32 %o, %b;"),
          ("f32", param + "atom.global.add.f32 %o, [%q], %x;"),
          ("b32", param + "atom.global.inc.u32 %o, [%q+4], %a;"),
          ("b32", param + "atom.global.exch.b32 %o, [%q+8], %a;"),
          ("b32", param + "atom.global.cas.b32 %o, [%q+12], %a, %b;"),
          ("b32", param + "ld.global.b32 %o, [%q+4];"),
          ("b32", param + "st.global.b32 [%q+12], %a; mov.b32 %o, %b;"),
          # Shared memory at fixed addresses: address 0 prints as [RZ], others as [0x4].
          ("b32", "st.shared.u16 [smem], %ha; st.shared.u32 [smem+4], %a; @%pa st.shared.u16 [smem], %hb; "
                  "bar.sync 0; ld.shared.u32 %o, [smem];"),
          ("b32", "st.shared.u8 [smem], %a; st.shared.u64 [smem+8], %la; bar.sync 0; ld.shared.u16 %t1, [smem]; "
                  "ld.shared.u8 %t2, [smem+2]; add.u32 %o, %t1, %t2;"),
          # Shared counters (atomicAdd(&s[i], 1) without a result: ATOMS.POPC.INC).
          ("b32", "and.b32 %t1, %a, 255; shl.b32 %t1, %t1, 2; mov.u32 %t2, smem; add.u32 %t1, %t1, %t2; "
                  "red.shared.add.u32 [%t1], 1; bar.sync 0; ld.shared.u32 %o, [%t1];"),
          ("b32", "and.b32 %t1, %a, 255; shl.b32 %t1, %t1, 3; mov.u32 %t2, smem; add.u32 %t1, %t1, %t2; "
                  "red.shared.add.u64 [%t1], 1; red.shared.add.u32 [%t1+4], %b; bar.sync 0; ld.shared.u32 %o, [%t1];"),
          # Division by a kernel parameter (a uniform divisor: I2F.U32.RP R, UR ...), and
          # 64-bit negation of one (UIADD3 with a carry, URZ minus UR).
          ("b32", ".reg .b32 %m; ld.param.u32 %m, [p_n]; add.u32 %m, %m, 3; div.u32 %o, %a, %m;"),
          ("b32", ".reg .b32 %m; ld.param.u32 %m, [p_n]; add.u32 %m, %m, 3; rem.s32 %o, %a, %m;"),
          ("b64", ".reg .b64 %q; ld.param.u64 %q, [p_in]; add.s64 %q, %q, 5; div.u64 %o, %la, %q;"),
          ("b64", ".reg .b64 %q; ld.param.u64 %q, [p_in]; neg.s64 %q, %q; add.s64 %o, %la, %q;"),
          ("b64", ".reg .b64 %q; .reg .b32 %m; ld.param.u32 %m, [p_n]; cvt.s64.s32 %q, %m; "
                  "div.s64 %o, %la, %q;"),
          # 64-bit sums of uniform values: UIADD3 with a carry-out predicate.
          ("b32", ".reg .b64 %q, %r; ld.param.u64 %q, [p_out]; ld.param.u64 %r, [p_in]; "
                  "add.s64 %q, %q, %r; cvta.to.global.u64 %q, %q; ld.global.b32 %o, [%q];"),
          ("b32", ".reg .b64 %q, %r; .reg .b32 %m; ld.param.u64 %q, [p_out]; ld.param.u32 %m, [p_n]; "
                  "mul.wide.u32 %r, %m, 12; add.s64 %q, %q, %r; cvta.to.global.u64 %q, %q; "
                  "red.global.add.u32 [%q], %a; mov.b32 %o, %b;")]
    return s


def _parameters() -> list[Snippet]:
    """Kernel parameters converted or dereferenced where they are: ptxas reads them straight
    from the constant bank or a uniform register (`I2F.S64 R2, c[0x0][0x168]`, `I2F.F64 R14,
    UR7`, `F2F.F32.F64 R9, c[0x0][0x168]`, `MUFU.RCP64H R5, UR4`), and generic stores and
    atomics through a parameter's pointer with a per-thread offset (`ST.E.U16 [R4.64+-0x2]`,
    `ATOM.E.ADD.F16x2`, with and without a result)."""
    s: list[Snippet] = []
    for ptype, cvt in (("s64", "cvt.rn.f32.s64"), ("u64", "cvt.rn.f32.u64"), ("s64", "cvt.rn.f64.s64"),
                       ("s32", "cvt.rn.f64.s32"), ("u32", "cvt.rn.f64.u32"), ("f64", "cvt.rn.f32.f64")):
        dtype = "f64" if ".f64." in cvt else "f32"
        out = "b64" if dtype == "f64" else "b32"
        src = "p_in" if "64" in ptype else "p_n"
        reg = f".reg .{ptype} %v; .reg .{dtype} %w; ld.param.{ptype} %v, [{src}]; "
        s.append((out, reg + f"{cvt} %w, %v; mov.b{out[1:]} %o, %w;"))
        # Uniform arithmetic first: the converted value comes from a uniform register (a
        # double as the bits of a 64-bit integer sum).
        add = (f"add.{ptype} %v, %v, 3;" if ptype != "f64" else
               ".reg .b64 %i; mov.b64 %i, %v; add.s64 %i, %i, 3; mov.b64 %v, %i;")
        s.append((out, reg + f"{add} {cvt} %w, %v; mov.b{out[1:]} %o, %w;"))
    generic = (".reg .b64 %q; ld.param.u64 %q, [p_out]; cvt.u64.u32 %lb, %a; shl.b64 %lb, %lb, 1; "
               "add.s64 %q, %q, %lb; ")
    s += [("b32", generic + "st.u16 [%q+-2], %ha; mov.b32 %o, %b;"),
          ("b32", generic + "st.u32 [%q+4], %a; mov.b32 %o, %b;"),
          ("b32", generic + "atom.add.noftz.f16x2 %o, [%q+-2], %a;"),
          ("b32", generic + "atom.add.noftz.f16x2 %t1, [%q+-2], %a; mov.b32 %o, %b;"),
          ("b32", generic + "atom.add.u32 %o, [%q], %a;"),
          ("f32", generic + "atom.add.f32 %o, [%q+8], %x;")]
    # A double whose high word is uniform arithmetic on a parameter: MUFU.RCP64H R, UR.
    high = ".reg .b32 %m; .reg .f64 %v; ld.param.u32 %m, [p_n]; add.u32 %m, %m, 0x3ff00000; mov.b64 %v, {%a, %m}; "
    s += [("b64", high + f"{op}.approx.ftz.f64 %v, %v; mov.b64 %o, %v;") for op in ("rcp", "rsqrt")]
    return s


def _families(arch: str) -> dict[str, list[Snippet]]:
    sm = _sm(arch)
    fam = {"arith": _arith(), "float": _float(), "cvt": _cvt(), "setp": _setp(),
           "special": _special(), "warp": _warp(), "memory": _memory(), "atomics": _atomics(),
           "control": _control(), "uniform": _uniform(),
           "parameters": _parameters()}
    if 75 <= sm < 100:          # (Blackwell's ptxas emulates these shapes with its larger ones)
        fam["sm75"] = _sm75(sm)
    if sm >= 80:
        fam["sm80"] = _sm80()
    if sm >= 90:
        fam["sm90"] = _sm90()
    if sm == 90:
        fam["sm90a"] = _sm90a()
    if sm >= 100:
        fam["sm100"] = _sm100()
    if sm in (100, 103):
        fam["sm100a"] = _sm100a()
    if sm in (120, 121):
        fam["sm120a"] = _sm120a()
    fam["idioms"] = _idioms()
    return fam


_PTX_VERSION = {"sm_70": "7.0", "sm_75": "7.0", "sm_80": "7.1", "sm_86": "7.1", "sm_89": "7.8",
                "sm_90": "8.0", "sm_90a": "8.0"}
# Blackwell (sm_100, sm_103, sm_120, sm_121 and their `a` targets): PTX 8.8, ptxas 12.9's newest.
_PTX_VERSION_BLACKWELL = "8.8"


def _ptx_version(target: str) -> str:
    return _PTX_VERSION.get(target) or (_PTX_VERSION_BLACKWELL if _sm(target) >= 100 else "8.0")


def _sm(target: str) -> int:
    """'sm_100a' -> 100."""
    return int("".join(ch for ch in target.split("_")[1] if ch.isdigit()))

_PROLOGUE = """
.visible .entry {name}(.param .u64 p_out, .param .u64 p_in, .param .u32 p_n){directives}
{{
.reg .b32 %a, %b, %c, %t<4>; .reg .f32 %x, %y, %z; .reg .f64 %da, %db, %dc;
.reg .b64 %la, %lb, %ptr, %out, %off; .reg .b16 %ha, %hb; .reg .pred %pa, %p<10>; .reg .u32 %sp, %tx;
ld.param.u64 %ptr, [p_in]; ld.param.u64 %out, [p_out];
cvta.to.global.u64 %ptr, %ptr; cvta.to.global.u64 %out, %out;
mov.u32 %tx, %tid.x; mul.wide.u32 %off, %tx, 64; add.s64 %ptr, %ptr, %off; add.s64 %out, %out, %off;
ld.global.b32 %a, [%ptr]; ld.global.b32 %b, [%ptr+4]; ld.global.b32 %c, [%ptr+8];
ld.global.f32 %x, [%ptr+12]; ld.global.f32 %y, [%ptr+16]; ld.global.f32 %z, [%ptr+20];
ld.global.f64 %da, [%ptr+24]; ld.global.f64 %db, [%ptr+32]; ld.global.f64 %dc, [%ptr+40];
ld.global.b64 %la, [%ptr+48]; ld.global.b64 %lb, [%ptr+56];
ld.global.b16 %ha, [%ptr+2]; ld.global.b16 %hb, [%ptr+6];
setp.lt.u32 %pa, %a, %b; mov.u32 %sp, smem; shl.b32 %t0, %tx, 4; add.u32 %sp, %sp, %t0;
"""


def header(arch: str) -> str:
    """The module header every corpus kernel of `arch` starts with."""
    return (f".version {_ptx_version(arch)}\n.target {arch}\n.address_size 64\n"
            ".shared .align 16 .b8 smem[4096];\n.const .align 8 .b8 cst[256];\n"
            ".global .align 8 .b8 gbuf[256];\n")


def module(arch: str, texts: Iterable[str]) -> str:
    """Corpus kernels (texts as kernels() gives them) as one PTX module: one ptxas run and
    one disassembly for many kernels."""
    head = header(arch)
    bodies = []
    for text in texts:
        if not text.startswith(head):
            raise ValueError(f"not a corpus kernel of {arch}")
        bodies.append(text[len(head):])
    return head + "\n".join(bodies)


# Families whose PTX needs an arch-specific target (`wgmma` is sm_90a's, not sm_90's): same
# instruction set, other target.
def _family_target(family: str, arch: str) -> str:
    return arch + "a" if family in _ARCH_SPECIFIC else arch


_ARCH_SPECIFIC = {"sm90a", "sm100a", "sm120a"}
# Entry directives a family needs: setmaxnreg is ignored unless ptxas knows the register count
# at entry.
_FAMILY_DIRECTIVES = {"sm90a": " .maxntid 384, 1, 1 .maxnreg 168",
                      "sm100a": " .maxntid 128, 1, 1"}


def kernels(arch: str, per_kernel: int = 12) -> Iterator[tuple[str, str]]:
    """(name, PTX text) for every corpus kernel of `arch` (its `.target`: the arch, or the
    arch-specific one that a family needs)."""
    n = 0
    for family, snippets in _families(arch).items():
        header_text = header(_family_target(family, arch))
        for start in range(0, len(snippets), per_kernel):
            chunk = snippets[start:start + per_kernel]
            name = f"{family}_{start // per_kernel}"
            body = [header_text, _PROLOGUE.format(name=name, directives=_FAMILY_DIRECTIVES.get(family, "")), ".local .align 8 .b8 loc[64];"]
            for i, (otype, code) in enumerate(chunk):
                n += 1
                body.append("{ .reg .%s %%o; %s" % (otype, code.replace("{n}", str(n))))
                body.append(f"st.global.{otype} [%out+{(i * 8) % 64}], %o; }}")
            body.append("ret;\n}\n")
            yield name, "\n".join(body)
        # Each snippet alone too, so that one ptxas refusal costs only its own snippet.
    for family, snippets in _families(arch).items():
        header_text = header(_family_target(family, arch))
        for i, (otype, code) in enumerate(snippets):
            n += 1
            name = f"{family}_one_{i}"
            yield name, "\n".join([header_text, _PROLOGUE.format(name=name, directives=_FAMILY_DIRECTIVES.get(family, "")), ".local .align 8 .b8 loc[64];",
                                   "{ .reg .%s %%o; %s" % (otype, code.replace("{n}", str(n))),
                                   f"st.global.{otype} [%out], %o; }}", "ret;\n}\n"])


# Global memory accesses whose hidden descriptor register is learned (learn.learn_descriptors).
_DESCRIPTOR_ACCESSES = {
    "ld": "ld.global.b32 %b, [%ptr];",
    "ld_nc": "ld.global.nc.b32 %b, [%ptr+8];",
    "ld_v4": "ld.global.v4.b32 {%b, %c, %d, %e}, [%ptr+16]; add.u32 %b, %b, %e;",
    "ld_generic": "cvta.global.u64 %gp, %ptr; ld.b32 %b, [%gp];",
    "st_generic": "cvta.global.u64 %gp, %ptr; st.b32 [%gp+4], %a; mov.b32 %b, %a;",
    "st": "st.global.b32 [%ptr+4], %a; mov.b32 %b, %a;",
    "atom": "atom.global.add.u32 %b, [%ptr], %a;",
    "atom_cas": "atom.global.cas.b32 %b, [%ptr], %a, 7;",
    "red": "red.global.add.u32 [%ptr], %a; mov.b32 %b, %a;",
    "red_f32": "red.global.add.f32 [%ptr], %f; mov.b32 %b, %a;",
    # Generic (ST.E, ATOM.E) through a parameter's pointer with a per-thread offset.
    # (the RED first: alone, a store is scheduled before the uniform values and always gets UR4)
    "st_param": "ld.param.u64 %gp, [p_in]; add.s64 %gp, %gp, %off; red.global.add.u32 [%ptr], %a; "
                "st.b32 [%gp+-4], %a; mov.b32 %b, %a;",
    "atom_param": "ld.param.u64 %gp, [p_out]; mov.u32 %d, %tid.x; mul.wide.u32 %off, %d, 4; "
                  "add.s64 %gp, %gp, %off; atom.add.u32 %b, [%gp], %a;",
}
_DESCRIPTOR_ACCESSES_SM80 = {
    "cp_async": "cp.async.ca.shared.global [dsm], [%ptr], 4; cp.async.wait_all; ld.shared.b32 %b, [dsm];",
}
# How many uniform values stay live across the access: ptxas gives each a uniform register,
# so the descriptor lands in a different pair (UR4, UR6, UR8 ...) as the count grows.
_LIVE_UNIFORMS = range(0, 9, 2)


def descriptor_kernels(arch: str) -> Iterator[tuple[str, str]]:
    """(name, PTX) pairs, one module each: global memory accesses with 0..8 uniform values
    live across them, so that ptxas places the memory descriptor in different uniform pairs."""
    sm = _sm(arch)
    accesses = dict(_DESCRIPTOR_ACCESSES, **(_DESCRIPTOR_ACCESSES_SM80 if sm >= 80 else {}))
    head = (f".version {_ptx_version(arch)}\n.target {arch}\n.address_size 64\n"
            ".shared .align 16 .b8 dsm[64];\n")
    for access, code in accesses.items():
        for live in _LIVE_UNIFORMS:
            name = f"desc_{access}_{live}"
            regs = "".join(f", %u{i}" for i in range(live))
            setup = "".join(f"shl.b32 %u{i}, %g, {i + 3}; min.u32 %u{i}, %u{i}, {0x7fffffff - i};\n"
                            for i in range(live))
            use = "".join(f"add.u32 %b, %b, %u{i}; setp.lt.u32 %p, %b, %u{i}; selp.b32 %b, %b, %u{i}, %p;\n"
                          for i in range(live))
            yield name, (
                f"{head}.visible .entry {name}(.param .u64 p_out, .param .u64 p_in)\n{{\n"
                f".reg .b32 %a, %b, %c, %d, %e, %g{regs}; .reg .f32 %f; .reg .b64 %ptr, %out, %off, %gp; "
                ".reg .pred %p;\n"
                "ld.param.u64 %ptr, [p_in]; ld.param.u64 %out, [p_out];\n"
                "cvta.to.global.u64 %ptr, %ptr; cvta.to.global.u64 %out, %out;\n"
                "mov.u32 %g, %nctaid.x; mov.u32 %a, %ctaid.x; mov.b32 %f, %a; mul.wide.u32 %off, %a, 4;\n"
                "add.s64 %ptr, %ptr, %off; add.s64 %out, %out, %off;\n"
                f"{setup}{code}\n{use}st.global.b32 [%out], %b;\nret;\n}}\n")
