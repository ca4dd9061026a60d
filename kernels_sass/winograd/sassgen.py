"""The Winograd F(2x2,3x3) main kernel in SASS, designed for sm_90, generated per problem shape
and arch.

    text = generate(Shape(N, C, H, W, K))        # sassas source, fully unrolled (sm_90)
    text = generate(Shape(...), fit(Options(), target("sm_86")), "sm_86")   # another arch
    cubin = cubins.build(Shape(...))              # assembled with sassas (cached: cubins.py)

The design is the paper's (Yan, Wang, Chu, PPoPP'20), adapted to sm_90; kernels_sass/winograd/
winograd.cu is the same algorithm in CUDA-C, with the same layouts and thread roles:

- 256 threads, one block per SM (253 registers); grid (Kpad/64, ceil(N/32), TH*TW).
- bk = 64 filters, bn = 32 tiles (32 images at one tile position), bc = 8 channels an
  iteration. Thread tid loads the 4x4 input window of channel c0 + tid/32, image tid%32
  (16 predicated LDG; the zero padding is implicit: a load of a padding element is predicated
  off and its register keeps the zero it got at the start), transforms it (B^T d B, 32 FADD)
  and stores the 16 values to shared memory; 8 LDG.128 + 8 STS.128 a thread bring the
  transformed filters (U, from the filter-transform kernel) to shared memory.
- 16 batched GEMMs 64x32x8 an iteration: half-warp e = tid/16 computes position e; its
  thread (kg, tg) = (tid%16/4, tid%4) holds a 16x8 accumulator tile: k = q*16 + kg*4 + 0..3
  (4 LDS.128), t = q*16 + tg*4 + 0..3 (2 LDS.128) a channel. sm_90 has 128 FP32 lanes per
  SM against 128 B/clk of shared memory, so the paper's two 8x8 tiles (1 byte loaded an FFMA)
  would need the whole shared-memory bandwidth; one 16x8 tile needs 0.75 byte an FFMA.
- Shared memory (128 KiB, two 64 KiB buffers): U[e][c][k] with 528 floats an e, V[e][c][t]
  with 272 floats an e: both paddings make the 8 distinct 16-byte chunks a warp's LDS.128
  reads land in 8 distinct bank quads; the input STS (consecutive images) and filter STS.128
  (consecutive 16-byte chunks) are conflict-free too.
- Software pipelining: LDS of the next channel's operands during this channel's 128 FFMAs
  (two register sets), global loads of the next 8 channels during this iteration's GEMMs,
  their transform and STS into the other buffer late in the iteration, one BAR an iteration.
- Output transform (A^T M A) through shared memory in two rounds of 32 filters.

Other archs (target.Target, from sassas's tables): the shared-memory base, the constant-bank
offsets (parameters, gridDim.x, the memory descriptor; sm_75's global accesses take none), RED
for REDG before sm_90. Where a block cannot have 128 KiB of shared memory (sm_75: 64 KiB; sm_86,
sm_89, sm_120: 99 KiB) the main loop has one buffer (Options.buffers = 1: the next block's
stores wait at a BAR for every warp's last reads, a second BAR publishes them) and the filters
go through registers (no LDGSTS); on sm_75 the output staging rows lose their padding (64 KiB).
`fit` picks these per arch. Only the sm_90 design was tuned and run on a GPU.

SASS-level switches (ablation): yield strategy, LDG spacing, STS spacing; see Options.
Control codes of the main loop are set here by construction and checked with sassas.hazards;
the prologue and epilogue get theirs from kernels_sass.winograd.sched.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

# (ARCH, SMEM_BYTES and fit also for sassgen's users)
from .f2_layout import (ACC, ARCH, ASYNC_SB, BUF, ES_U, ES_V, LOAD_GROUPS, MIN_DIST, M_SLOTS, PARAMS,
                        PLAIN_SLOTS, PRED_DIST, P_U, P_X, P_Y, RA, RB, RF, RT, RX, R_C0, R_CLIM, R_LDSA,
                        R_LDSB, R_M, R_MASK, R_STSU, R_STSV, R_UP, R_XP, SLOTS, SLOTS_PER_STEP,
                        SMEM_BYTES, STEPS, THREADS, T_SLOTS, UR_NEXT, UR_STRIDE, UR_TILE, V_OFF, X_SLOTS,
                        dynamic_smem, fit, load_pred, smem_bytes, staging_row, window_bits)
from .pieces import (address, block_ids, input_transform_ops, kernel_head, kernel_text, magic, mad,
                     output_transform_ops, signed_hex, tile_coordinates)
from .plan import BC, BK, Options, Shape, check_shape, split_of, uses_tile_loop
from .sched import Op, Seq, mark_reuse
from .target import DEFAULT_ARCH, target


# ---- the generator -------------------------------------------------------------------------
class Generator:
    def __init__(self, shape: Shape, opts: Options = Options(), arch: str = DEFAULT_ARCH):
        check_shape(shape)
        self.s = shape
        self.o = opts
        self.t = t = target(arch)
        if opts.buffers not in (1, 2):
            raise ValueError(f"buffers {opts.buffers}: 1 or 2")
        if opts.ldgsts and (opts.buffers == 1 or not t.async_copy):
            raise ValueError(f"LDGSTS needs two buffers and an arch that has it ({t.arch}, buffers {opts.buffers}): "
                             f"Options(ldgsts=False), or sassgen.fit")
        self.base = t.smem_base
        self.buf = BUF if opts.buffers == 2 else 0          # the XOR between the buffers
        self.ks_m = staging_row(opts, t)
        self.es_m = 32 * self.ks_m
        self.smem_bytes = dynamic_smem(opts, t.arch)
        if self.smem_bytes > t.max_smem:
            raise ValueError(f"{self.smem_bytes} bytes of shared memory, more than a block has on {t.arch} "
                             f"({t.max_smem}): sassgen.fit")
        self.sp = split_of(shape, opts)
        self.tile_loop = uses_tile_loop(shape, opts)
        self.overlap = self.tile_loop and opts.overlap
        self.lines: list[str] = []

    # constants
    @property
    def chan_stride(self) -> int:          # bytes from one channel block of x to the next
        return BC * self.s.HWN * 4

    @property
    def ublock_stride(self) -> int:        # bytes from one channel block of U to the next
        return BC * 64 * 4

    def x_off(self, q: int) -> int:        # byte offset of window element q = 4i + j
        i, j = divmod(q, 4)
        return (i * self.s.W + j) * self.s.N * 4

    def u_off(self, j: int) -> int:        # byte offset of the j-th filter chunk (channel j)
        return j * 64 * 4

    def seq(self) -> Seq:
        if self.o.safe:
            return Seq(self.t.arch, min_fixed=24, pred_latency=40, spell=self.t.spell)
        return Seq(self.t.arch, spell=self.t.spell)

    # ---- pieces shared by the prologue and the loop ----
    def r2p_op(self, group: int) -> str:
        """Predicates P0.. of load group `group` from its byte of the load mask."""
        byte = f".B{group}" if group else ""
        return f"R2P PR, R{R_M}{byte}, {(1 << len(LOAD_GROUPS[group])) - 1:#x}"

    def rx(self, q: int) -> int:           # register of window element q = 4i + j
        return RX((X_SLOTS if self.o.bank_slots else PLAIN_SLOTS)[q])

    def input_transform(self):
        """input_transform_ops on this kernel's window and transform registers."""
        t = T_SLOTS if self.o.bank_slots else PLAIN_SLOTS
        return input_transform_ops([self.rx(q) for q in range(16)], [RT(t[q]) for q in range(16)], RT(16))

    def ldg_x(self, q: int) -> str:
        return f"@P{load_pred(q)} LDG.E{self.t.scope} R{self.rx(q)}, {self.t.global_address(R_XP, self.x_off(q))}"

    def ldg_u(self, j: int) -> str:
        return f"LDG.E.128{self.t.scope} R{RF + 4 * j}, {self.t.global_address(R_UP, self.u_off(j))}"

    def ldgsts_u(self, j: int) -> str:
        """The j-th filter chunk straight into the other buffer (where sts_u would store it)."""
        return f"LDGSTS.E.BYPASS.128 [R{R_STSU}+{j * 64 * 4:#x}], {self.t.global_address(R_UP, self.u_off(j))}"

    def block_loads(self, chan_check: str, spacing: Optional[int] = None, async_filters: bool = False
                    ) -> tuple[list[tuple[str, dict]], list[tuple[str, dict]]]:
        """The loads of one channel block: (input loads, filter loads), each in order as
        (text, placement) with placement keys `after` (FFMA slots, >= cycles, after the previous
        instruction of the list), `wb`, `wait`. The channel check sets P6 (this thread's
        channel of the block exists); SEL clears the mask if not; each load group comes
        PRED_DIST after its R2P; the R2P of a group follows the last load of the group before
        (guards are read at issue). The loads read their address registers late, after issue:
        read barrier 5, which the pointer advance waits on."""
        sp = self.o.ldg_spacing if spacing is None else spacing
        out = [(chan_check, {"after": 0}),
               (f"SEL R{R_M}, R{R_MASK}, RZ, P6", {"after": PRED_DIST})]
        gap = MIN_DIST
        for grp, loads in enumerate(LOAD_GROUPS):
            out.append((self.r2p_op(grp), {"after": gap}))
            for m, q in enumerate(loads):
                out.append((self.ldg_x(q), {"after": PRED_DIST if m == 0 else sp, "wb": 2, "rb": 5}))
            gap = 0
        # the filter loads overwrite RF: after the stores of the filters read it (barrier 4).
        # async_filters: LDGSTS into shared memory, committed as one group by LDGDEPBAR, which
        # counts it on scoreboard ASYNC_SB (its write-barrier field, as ptxas writes it); the
        # DEPBAR.LE SB<ASYNC_SB> before the iteration's BAR waits for it
        usp = sp if spacing is not None else self.o.ldgu_spacing
        if async_filters:
            filters = [(self.ldgsts_u(j), {"after": usp, "rb": 5}) for j in range(8)]
            filters.append(("LDGDEPBAR", {"after": 1, "wb": ASYNC_SB}))
        else:
            filters = [(self.ldg_u(j), {"after": usp, "wb": 3, "rb": 5, "wait": (1 << 4) if j == 0 else 0})
                       for j in range(8)]
        return out, filters

    def sts_v(self, e: int, reg: int) -> str:
        return f"STS [R{R_STSV}+{e * ES_V * 4:#x}], R{reg}"

    def sts_u(self, j: int) -> str:
        return f"STS.128 [R{R_STSU}+{j * 64 * 4:#x}], R{RF + 4 * j}"

    def lds_ops(self, step: int, buf: int) -> list[str]:
        a = [f"LDS.128 R{RA(buf, 4 * q)}, [R{R_LDSA}+{step * 64 * 4 + q * 16 * 4:#x}]" for q in range(4)]
        b = [f"LDS.128 R{RB(buf, 4 * q)}, [R{R_LDSB}+{step * 32 * 4 + q * 16 * 4:#x}]" for q in range(2)]
        return a + b

    def advance_ops(self, ptr: int, stride: int, carry: int) -> list[str]:
        """A 64-bit pointer to the next channel block (carry in P<carry>)."""
        return [f"IADD3 R{ptr}, P{carry}, R{ptr}, {stride:#x}, RZ",
                f"IADD3.X R{ptr + 1}, RZ, R{ptr + 1}, RZ, P{carry}, !PT"]

    def unit_tile(self, q: Seq, unit_ur: int, tile: int, quo: int, tmp: int, part: Optional[int] = None) -> None:
        """Split-C: R<tile> <- the tile of the unit in UR<unit_ur>, R<part> <- its part (0 for a
        whole tile), P0 <- the unit is a part of a split tile; R<quo>, R<tmp> are clobbered."""
        sp = self.sp
        q.op(f"MOV R{tile}, UR{unit_ur}")
        q.op(f"IADD3 R{tmp}, R{tile}, {signed_hex(-sp.whole)}, RZ")                  # v = unit - whole
        q.op(f"ISETP.GE.AND P0, PT, R{tmp}, RZ, PT")
        q.op(f"MOV R{quo}, {magic(sp.parts):#x}")
        q.op(f"IMAD.HI.U32 R{quo}, R{tmp}, R{quo}, RZ")                         # v / parts
        if part is not None:
            q.op(f"IMAD R{part}, R{quo}, {signed_hex(-sp.parts)}, R{tmp}")            # v % parts
            q.op(f"@!P0 MOV R{part}, RZ")
        q.op(f"IADD3 R{quo}, R{quo}, {signed_hex(sp.whole)}, RZ")
        q.op(f"@P0 MOV R{tile}, R{quo}")

    # ---- prologue, in two parts ----
    # Part 1 (tile_setup) computes a tile's pointers, addresses and load mask and issues the
    # global loads of its first channel block; part 2 (tile_start) transforms and stores that
    # block. In the persistent tile loop, part 1 of the next tile runs inside this tile's
    # epilogue, so the loads' latency passes under the output transform.
    LOAD_BARRIERS = (2, 3)          # the first block's global loads (as in the loop; 3 is free
                                    # there with ldgsts, which counts its groups on ASYNC_SB)
    SHORT_BARRIERS = (0, 1, 4, 5)   # everything else of the prologue and epilogue

    def tile_setup(self, q: Seq, tile_ur: Optional[int], base: int) -> None:
        """Part 1 for the tile in UR<tile_ur> (None: the block index), temporaries from R<base>
        on (22 registers): pointers, shared addresses, mask, the zeroed input window, and the
        first channel block's loads on LOAD_BARRIERS. A tile number past the last tile loads
        nothing (its load mask is zero; the filter pointer stays inside U)."""
        s = self.s
        (R_tid, R_kb, R_nb, R_pos, R_th, R_tw, R_lane, R_warp, R_n, R_off, R_lo, R_hi, R_e, R_c16,
         R_rf, R_cf, R_t, R_tmp) = range(base, base + 18)
        R_x, R_u = base + 18, base + 20
        R_cb = R_cf        # split-C: the unit's first channel (until the mask needs R_cf)
        split = self.sp.active and tile_ur is not None
        # (the short loads on barriers 0, 1: in the epilogue, 4 and 5 carry the staging stores)
        q.op(f"S2R R{R_tid}, SR_TID.X", barriers=(0, 1))
        if split:
            # the unit's tile and its channels from cb on, `blocks` blocks of 8: the channel
            # counter starts at 8 + off, off = Cpad - 8 * blocks, so that the loop's test
            # (C0 <= Cpad) stays the same instruction; the channel limit moves by off too.
            # (A register for the bound instead: R253 is past what the hardware gives a
            # 255-register kernel, an illegal instruction on the H100.)
            sp = self.sp
            self.unit_tile(q, tile_ur, R_pos, R_nb, R_tmp, part=R_rf)
            mad(q, R_cb, R_rf, BC * sp.chunk, None, R_tmp)
            q.op(f"MOV R{R_C0}, {BC + s.Cpad - BC * sp.chunk:#x}")
            last = sp.part_iters()[-1]
            if last != sp.chunk:
                q.op(f"ISETP.EQ.AND P1, PT, R{R_rf}, {sp.parts - 1:#x}, P0")
                q.op(f"@P1 MOV R{R_C0}, {BC + s.Cpad - BC * last:#x}")
            q.op(f"@!P0 MOV R{R_C0}, {BC:#x}")
            block_ids(q, s, f"R{R_pos}", R_kb, R_nb, R_pos, R_tmp)
        else:
            block_ids(q, s, None if tile_ur is None else f"UR{tile_ur}", R_kb, R_nb, R_pos, R_tmp)
        for text in self.t.desc_load():
            q.op(text)
        q.op(f"LDC.64 R{R_x}, {self.t.param(P_X)}", barriers=(0, 1))
        q.op(f"LDC.64 R{R_u}, {self.t.param(P_U)}", barriers=(0, 1))
        # tile position
        tile_coordinates(q, s, R_tid, R_nb, R_pos, R_th, R_tw, R_lane, R_warp, R_n, R_tmp)
        # input pointer: x + 4 * (warp*HWN + (2th-1)*W*N + (2tw-1)*N + n)
        mad(q, R_off, R_warp, s.HWN, R_n, R_tmp)
        if split:
            mad(q, R_off, R_cb, s.HWN, R_off, R_tmp)
        mad(q, R_off, R_th, 2 * s.W * s.N, R_off, R_tmp)
        mad(q, R_off, R_tw, 2 * s.N, R_off, R_tmp)
        q.op(f"IADD3 R{R_off}, R{R_off}, {signed_hex(-(s.W + 1) * s.N)}, RZ")
        q.op(f"SHF.L.U32 R{R_lo}, R{R_off}, 0x2, RZ")
        q.op(f"SHF.R.S32.HI R{R_hi}, RZ, 0x1e, R{R_off}")
        q.op(f"IADD3 R{R_XP}, P0, R{R_lo}, R{R_x}, RZ")
        q.op(f"IADD3.X R{R_XP + 1}, R{R_hi}, R{R_x + 1}, RZ, P0, !PT")
        # filter pointer, U[kb][e][c][64]: u + 4 * (((kb*16 + e)*rows + c)*64 + (tid&15)*4),
        # e = tid >> 4
        q.op(f"SHF.R.U32.HI R{R_e}, RZ, 0x4, R{R_tid}")
        q.op(f"LOP3.LUT R{R_c16}, R{R_tid}, 0xf, RZ, 0xc0, !PT")
        mad(q, R_t, R_kb, 16 * s.U_ROWS * 64, None, R_tmp)
        mad(q, R_off, R_e, s.U_ROWS * 64, R_t, R_tmp)
        if split:
            mad(q, R_off, R_cb, 64, R_off, R_tmp)
        mad(q, R_off, R_c16, 0x4, R_off, R_tmp)
        q.op(f"SHF.L.U32 R{R_lo}, R{R_off}, 0x2, RZ")
        q.op(f"SHF.R.U32.HI R{R_hi}, RZ, 0x1e, R{R_off}")
        q.op(f"IADD3 R{R_UP}, P0, R{R_lo}, R{R_u}, RZ")
        q.op(f"IADD3.X R{R_UP + 1}, R{R_hi}, R{R_u + 1}, RZ, P0, !PT")
        # shared-memory addresses (buffer 0)
        address(q, R_LDSA, ((R_e, ES_U * 4),), self.base, R_tmp)
        q.op(f"SHF.L.U32 R{R_t}, R{R_tid}, 0x2, RZ")
        q.op(f"LOP3.LUT R{R_t}, R{R_t}, 0x30, RZ, 0xc0, !PT")               # kg * 16
        q.op(f"IADD3 R{R_LDSA}, R{R_LDSA}, R{R_t}, RZ")
        address(q, R_LDSB, ((R_e, ES_V * 4),), self.base + V_OFF * 4, R_tmp)
        q.op(f"SHF.L.U32 R{R_t}, R{R_tid}, 0x4, RZ")
        q.op(f"LOP3.LUT R{R_t}, R{R_t}, 0x30, RZ, 0xc0, !PT")               # tg * 16
        q.op(f"IADD3 R{R_LDSB}, R{R_LDSB}, R{R_t}, RZ")
        address(q, R_STSV, ((R_tid, 0x4),), self.base + V_OFF * 4, R_tmp)
        address(q, R_STSU, ((R_e, ES_U * 4),), self.base, R_tmp)
        mad(q, R_STSU, R_c16, 0x10, R_STSU, R_tmp)
        R_lim0 = R_lo       # the first block's channel limit: C - cb - warp
        if split:   # (before the mask takes R_cb's register)
            q.op(f"IADD3 R{R_lim0}, -R{R_warp}, {s.C:#x}, RZ")
            q.op(f"IADD3 R{R_lim0}, R{R_lim0}, -R{R_cb}, RZ")
            q.op(f"IADD3 R{R_CLIM}, R{R_lim0}, {signed_hex(-BC)}, R{R_C0}")         # ... + off
        # the 16-bit load mask: rows, columns, image (and tile) in range
        q.op(f"ISETP.GE.AND P0, PT, R{R_th}, 0x1, PT")
        q.op(f"ISETP.LE.AND P1, PT, R{R_th}, {signed_hex((s.H - 2) // 2)}, PT")
        q.op(f"ISETP.LE.AND P2, PT, R{R_th}, {signed_hex((s.H - 3) // 2)}, PT")
        q.op(f"ISETP.GE.AND P3, PT, R{R_tw}, 0x1, PT")
        q.op(f"ISETP.LE.AND P4, PT, R{R_tw}, {signed_hex((s.W - 2) // 2)}, PT")
        q.op(f"ISETP.LE.AND P5, PT, R{R_tw}, {signed_hex((s.W - 3) // 2)}, PT")
        if tile_ur is None:
            q.op(f"ISETP.LT.AND P6, PT, R{R_n}, {s.N:#x}, PT")
        else:
            q.op(f"MOV R{R_t}, UR{tile_ur}")
            q.op(f"ISETP.LT.AND P6, PT, R{R_t}, {self.sp.units:#x}, PT")
            q.op(f"ISETP.LT.AND P6, PT, R{R_n}, {s.N:#x}, P6")
        # window row 1 and column 1 are always inside the image; rows 0, 2, 3 and columns
        # 0, 2, 3 depend on P0..P2 and P3..P5
        q.op(f"MOV R{R_rf}, {window_bits(rows=[1]):#x}")
        for p, row in ((0, 0), (1, 2), (2, 3)):
            q.op(f"@P{p} LOP3.LUT R{R_rf}, R{R_rf}, {window_bits(rows=[row]):#x}, RZ, 0xfc, !PT")
        q.op(f"MOV R{R_cf}, {window_bits(cols=[1]):#x}")
        for p, col in ((3, 0), (4, 2), (5, 3)):
            q.op(f"@P{p} LOP3.LUT R{R_cf}, R{R_cf}, {window_bits(cols=[col]):#x}, RZ, 0xfc, !PT")
        q.op(f"LOP3.LUT R{R_MASK}, R{R_rf}, R{R_cf}, RZ, 0xc0, !PT")
        q.op(f"@!P6 MOV R{R_MASK}, RZ")
        if not split:
            q.op(f"IADD3 R{R_CLIM}, -R{R_warp}, {s.C:#x}, RZ")                # C - warp
        # the input window starts at zero (padding elements stay zero); first channel block
        for q_ in range(16):
            q.op(f"MOV R{self.rx(q_)}, RZ", y=False)
        inputs, filters = self.block_loads(f"ISETP.LT.AND P6, PT, RZ, R{R_lim0 if split else R_CLIM}, PT")
        for text, _ in inputs + filters:
            q.op(text, barriers=self.LOAD_BARRIERS, read_only=True)

    def tile_start(self) -> Seq:
        """Part 2: zero the accumulators, transform and store the first channel block into
        buffer 0, move the pointers on (the loads of part 1 have landed: see text())."""
        q = self.seq()
        for kk in range(16):
            for tt in range(8):
                q.op(f"MOV R{ACC(kk, tt)}, RZ", y=False)
        ops, where = self.input_transform()
        for t in ops:
            q.op(t)
        for e in range(16):
            q.op(self.sts_v(e, where[e]))
        for j in range(8):
            q.op(self.sts_u(j))
        for t in self.advance_ops(R_XP, self.chan_stride, 0) + self.advance_ops(R_UP, self.ublock_stride, 1):
            q.op(t)
        if not self.sp.active:      # (a split kernel's tile_setup sets it: see there)
            q.op(f"MOV R{R_C0}, {BC:#x}")
        if self.buf:
            # the stores' address registers: toggled only after the stores have read them
            q.op(f"LOP3.LUT R{R_STSV}, R{R_STSV}, {self.buf:#x}, RZ, 0x3c, !PT")
            q.op(f"LOP3.LUT R{R_STSU}, R{R_STSU}, {self.buf:#x}, RZ, 0x3c, !PT")
        return q

    # ---- the main loop body: 1024 FFMA slots with the other work placed between ----
    def loop_body(self) -> list[Op]:
        o = self.o
        ins: dict[int, list[Op]] = {}

        def at(slot: int, text: str, **kw) -> Op:
            op = Op(text, **kw)
            ins.setdefault(slot, []).append(op)
            return op

        # Every instruction between two FFMAs breaks the operand-reuse chain: the FFMA after it
        # reads all three sources from the register file, two banks on sm_90, and issues in two
        # cycles (microbench inst.ffma_banks). So the inserted work goes in clusters of up to
        # `cluster` instructions: one lost cycle a cluster, not one an instruction.
        g = max(1, o.cluster)

        def clustered(slot: int, texts: list[str], gap: int, **kw) -> int:
            """Place texts in clusters of g, `gap` FFMAs apart from `slot` on; returns the slot
            of the last cluster."""
            for c in range(0, len(texts), g):
                for m, t in enumerate(texts[c:c + g]):
                    at(slot, t, **{k: (v(c + m) if callable(v) else v) for k, v in kw.items()})
                slot += gap
            return slot - gap

        # LDS of the next channel's operands: steps 0..6 from this buffer
        for step in range(STEPS - 1):
            nxt = step + 1
            clustered(step * SLOTS_PER_STEP + 2, self.lds_ops(nxt, nxt % 2), 4, wb=nxt % 2)
        # Global loads. Iteration i computes channel block i from shared memory, transforms and
        # stores block i+1 (inputs loaded in iteration i-1, filters at the start of this one),
        # and loads the inputs of block i+2 as soon as the transform has read RX: global
        # latency gets most of an iteration. Memory instructions read their address registers
        # after issue: the loads set read barrier 5 and a pointer moves on after waiting on it.
        inputs, filters = self.block_loads(f"ISETP.LT.AND P6, PT, R{R_C0}, R{R_CLIM}, PT",
                                           async_filters=o.ldgsts)

        def place(slot, loads):
            for text, kw in loads:
                slot += kw["after"]
                at(slot, text, **{k: v for k, v in kw.items() if k != "after" and v})
            return slot

        # step 0: the channel counter and the input pointer move on to block i+2; the filters
        # of block i+1, then their pointer moves on
        A0 = 2 + 4 * 6 + MIN_DIST
        at(A0, f"IADD3 R{R_C0}, R{R_C0}, 0x8, RZ")
        for m, t in enumerate(self.advance_ops(R_XP, self.chan_stride, 6)):
            at(A0 + PRED_DIST * m, t, wait=(1 << 5) if m == 0 else 0)
        slot = place(A0 + 1, filters)
        for m, t in enumerate(self.advance_ops(R_UP, self.ublock_stride, 5)):
            at(slot + 4 * MIN_DIST + PRED_DIST * m, t, wait=(1 << 5) if m == 0 else 0)
        # transform (pass 1 per column, pass 2 per row: clusters of 4 independent FADDs),
        # stores to the other buffer
        P1 = o.transform_step * SLOTS_PER_STEP
        ops, where = self.input_transform()
        for m in range(0, len(ops), 4):
            slot = P1 + 2 * m if g == 1 else P1 + MIN_DIST * (m // 4)
            for k, t in enumerate(ops[m:m + 4]):
                at(slot + (2 * k if g == 1 else 0), t,
                   wait=((1 << 2) | (1 << 4)) if m + k == 0 else 0)
        fadds = sorted(s_ for s_, lst in ins.items() for op in lst if op.text.startswith("FADD"))
        last_fadd = fadds[-1]
        inputs_end = place(fadds[15] + MIN_DIST, inputs)    # after pass 1 read RX
        last = 7 * SLOTS_PER_STEP
        if o.buffers == 1:
            self.one_buffer_tail(at, where, inputs_end, last)
            return self.finish_body(ins)
        ss = o.sts_spacing
        slot = clustered(last_fadd + MIN_DIST, [self.sts_v(e, where[e]) for e in range(16)], ss, rb=4)
        if not o.ldgsts:
            slot = clustered(slot + ss, [self.sts_u(j) for j in range(8)], ss, rb=4,
                             wait=lambda j: (1 << 3) if j == 0 else 0)
        slot = max(slot, inputs_end)
        # the loop test (after the last R2P and SEL read P6), PRED_DIST before the branch
        at(slot + 1, f"ISETP.LE.AND P6, PT, R{R_C0}, {self.s.Cpad:#x}, PT")
        if slot + 1 + PRED_DIST > last - 8:
            raise ValueError(f"options {o} do not fit the iteration: the loads end at slot {slot}")
        # the stores' address toggles (after the stores read them: read barrier 4, and 5 for
        # the LDGSTS); the LDGSTS group landed in shared memory; then the barrier and the
        # loads' address toggles
        at(last - 8, f"LOP3.LUT R{R_STSV}, R{R_STSV}, {BUF:#x}, RZ, 0x3c, !PT",
           wait=(1 << 4) | ((1 << 5) if o.ldgsts else 0))
        at(last - 8, f"LOP3.LUT R{R_STSU}, R{R_STSU}, {BUF:#x}, RZ, 0x3c, !PT")
        if o.ldgsts:
            at(last - 8, f"DEPBAR.LE SB{ASYNC_SB}, 0x0")
        # With LDGSTS the next iteration's first instructions write the buffer that this
        # iteration's step-6 LDS (channel 7's operands, barrier 1, consumed only after the
        # BAR) read: each warp waits for those reads before the BAR, so that no warp's LDGSTS
        # can overtake another warp's LDS (a race by the ordering rules, not seen on its own
        # on the H100; the simulator completes an LDS at issue and cannot see it)
        at(last + 2, "BAR.SYNC.DEFER_BLOCKING 0x0", y=True, stall=6, wait=(1 << 1) if o.ldgsts else 0)
        at(last + 2, f"LOP3.LUT R{R_LDSA}, R{R_LDSA}, {BUF:#x}, RZ, 0x3c, !PT")
        at(last + 2, f"LOP3.LUT R{R_LDSB}, R{R_LDSB}, {BUF:#x}, RZ, 0x3c, !PT")
        # step 7: LDS of the next iteration's first channel
        clustered(last + 2 + MIN_DIST, self.lds_ops(0, 0), 4, wb=0)
        return self.finish_body(ins)

    def one_buffer_tail(self, at, where, inputs_end: int, last: int) -> None:
        """The end of an iteration with one buffer (Options.buffers = 1), in step 7: a BAR once
        this warp's last operands of the block (channel 7's, barrier 1) are in, so that every
        warp is done reading; the stores of the next block (its transform, and the filters
        from RF once their loads landed: barrier 3); a second BAR; the next iteration's first
        channel. The loop test right after the loads (which read P6 last)."""
        slot = last + 2
        at(inputs_end + 1, f"ISETP.LE.AND P6, PT, R{R_C0}, {self.s.Cpad:#x}, PT")
        if inputs_end + 1 + PRED_DIST > SLOTS:
            raise ValueError(f"options {self.o} do not fit the iteration: the loads end at slot {inputs_end}")
        at(slot, "BAR.SYNC.DEFER_BLOCKING 0x0", y=True, stall=6, wait=1 << 1)
        stores = [(self.sts_v(e, where[e]), 0) for e in range(16)] + \
            [(self.sts_u(j), (1 << 3) if j == 0 else 0) for j in range(8)]
        for text, wait in stores:
            slot += 2
            at(slot, text, rb=4, wait=wait)
        at(slot + 2, "BAR.SYNC.DEFER_BLOCKING 0x0", y=True, stall=6)
        for m, text in enumerate(self.lds_ops(0, 0)):
            at(slot + 2 + MIN_DIST + 4 * m, text, wb=0)

    def finish_body(self, ins: dict) -> list[Op]:
        """The FFMA stream of an iteration with the inserted work `ins` (slot -> ops), the
        branch, the yield flags and the reuse flags."""
        o = self.o
        body: list[Op] = []
        for slot in range(SLOTS):
            for op in ins.get(slot, []):
                if o.yield_mode == "natural":
                    op.y = True
                body.append(op)
            step, r = divmod(slot, SLOTS_PER_STEP)
            buf = step % 2
            i, jj = divmod(r, 8)
            j = jj if i % 2 == 0 else 7 - jj        # zigzag: B is reused across rows
            acc = ACC(i, j)
            op = Op(f"FFMA R{acc}, R{RA(buf, i)}, R{RB(buf, j)}, R{acc}", wait=(1 << buf) if r == 0 else 0)
            op.ffma = (RA(buf, i), RB(buf, j))
            body.append(op)
        body.append(Op(f"@P6 BRA LOOP", y=True, stall=5))
        # yield strategies
        if o.yield_mode in ("every7", "every8"):
            n = 7 if o.yield_mode == "every7" else 8
            for idx, op in enumerate(body):
                op.y = (idx % n == n - 1) or op.text.startswith(("BAR", "@P6 BRA"))
        elif o.yield_mode == "none":
            for op in body:
                op.y = op.text.startswith(("BAR", "@P6 BRA"))
        if o.safe:
            for op in body:
                if op.ffma is None:
                    op.stall, op.y = 15, True
                else:
                    op.stall = 4
        mark_reuse(body, across=o.reuse_slots)
        return body

    # ---- epilogue: output transform through shared memory ----
    def stage_round(self, q: Seq, r: int, R_ms: int) -> None:
        """The accumulator stores of round r: filter rows kk = 8r..8r+7 of this thread's tile,
        on read barriers 4 and 5 (only the staging loads into these registers wait for them)."""
        for qq in range(2):
            for i in range(4):
                kk = (2 * r + qq) * 4 + i
                for tq in range(2):
                    off = ((qq * 16 + i) * self.ks_m + tq * 16) * 4
                    q.op(f"STS.128 [R{R_ms}+{off:#x}], R{kk * 8 + 4 * tq}",   # tiles 4tq+{1,0,3,2}
                         barriers=(4, 5))     # leaves 0, 1 to the set-up work behind them

    # the loop's LDS (barriers 0, 1), loads (2, 3) and late reads (4, 5) are done; every warp
    # has read its last operands before the staging overwrites both buffers
    EPILOGUE_BAR = ("BAR.SYNC.DEFER_BLOCKING 0x0", 0x3f)

    def epilogue_branch(self) -> Seq:
        """Split-C: after the epilogue's first BAR, P0 <- this unit is a part of a split tile
        (the reducing epilogue, EPI_RED, adds its outputs into y)."""
        q = self.seq()
        q.op(self.EPILOGUE_BAR[0], wait=self.EPILOGUE_BAR[1])
        q.op(f"MOV R128, UR{UR_TILE}")
        q.op(f"ISETP.GE.AND P0, PT, R128, {self.sp.whole:#x}, PT")
        q.ops[-1].stall = max(q.ops[-1].stall, PRED_DIST)     # -> @P0 BRA EPI_RED
        return q

    def epilogue(self, reduce: bool = False) -> Seq:
        """The output transform through shared memory, in two rounds of 32 filters. Round r
        stores accumulator rows 8r..8r+7 (R64r..R64r+63) and then stages its values in the
        registers it just stored; R128..R151 hold the addresses. In the tile loop, part 1 of
        the next tile's prologue (temporaries R152..R173, loads into RX/RF) runs after round 0's
        stores, so its global loads are in flight during the rest of the output transform.
        reduce: the outputs are added into y (REDG), for the parts of a split tile; with a split
        the first BAR is in epilogue_branch."""
        s = self.s
        q = self.seq()
        q.pool = self.SHORT_BARRIERS
        (R_tid, R_kb, R_nb, R_pos, R_th, R_tw, R_lane, R_warp, R_n, R_off, R_lo, R_hi, R_e, R_t,
         R_ms, R_mr, R_k, R_tmp) = range(128, 146)
        R_y, R_yb, R_yp = 146, 148, (150, 174)    # R174: operand register of the loop, free here
        store = f"{self.t.reduce}.E.ADD.F32.FTZ.RN.STRONG.GPU" if reduce else f"STG.E{self.t.scope}"
        if not self.sp.active:
            q.op(self.EPILOGUE_BAR[0], wait=self.EPILOGUE_BAR[1])
        # round 0's stores need only the staging address: M[e][kg*4 + ..][tg*4 + ..] (tile
        # columns swapped in pairs, as in the accumulators); the rest of the set-up follows them
        q.op(f"S2R R{R_tid}, SR_TID.X")
        q.op(f"LDC.64 R{R_y}, {self.t.param(P_Y)}")
        q.op(f"SHF.R.U32.HI R{R_e}, RZ, 0x4, R{R_tid}")
        mad(q, R_ms, R_e, self.es_m * 4, None, R_tmp)
        q.op(f"IADD3 R{R_ms}, R{R_ms}, {self.base:#x}, RZ")
        q.op(f"SHF.L.U32 R{R_t}, R{R_tid}, 0x4, RZ")
        q.op(f"LOP3.LUT R{R_t}, R{R_t}, 0x30, RZ, 0xc0, !PT")                 # tg * 16
        q.op(f"IADD3 R{R_ms}, R{R_ms}, R{R_t}, RZ")
        q.op(f"SHF.R.U32.HI R{R_t}, RZ, 0x2, R{R_tid}")
        q.op(f"LOP3.LUT R{R_t}, R{R_t}, 0x3, RZ, 0xc0, !PT")                  # kg
        mad(q, R_ms, R_t, 4 * self.ks_m * 4, R_ms, R_tmp)
        self.stage_round(q, 0, R_ms)
        if self.sp.active:
            self.unit_tile(q, UR_TILE, R_pos, R_nb, R_tmp)
            block_ids(q, s, f"R{R_pos}", R_kb, R_nb, R_pos, R_tmp)
        else:
            block_ids(q, s, f"UR{UR_TILE}" if self.tile_loop else None, R_kb, R_nb, R_pos, R_tmp)
        tile_coordinates(q, s, R_tid, R_nb, R_pos, R_th, R_tw, R_lane, R_warp, R_n, R_tmp)
        # staging read address: M[q][warp*4 + xx][lane ^ 1]
        q.op(f"LOP3.LUT R{R_t}, R{R_lane}, 0x1, RZ, 0x3c, !PT")               # lane ^ 1
        mad(q, R_mr, R_t, 0x4, None, R_tmp)
        q.op(f"IADD3 R{R_mr}, R{R_mr}, {self.base:#x}, RZ")
        mad(q, R_mr, R_warp, 4 * self.ks_m * 4, R_mr, R_tmp)
        # output pointer: y + 4 * ((kb*64 + warp*4)*HWN + 2th*W*N + 2tw*N + n)
        q.op(f"SHF.L.U32 R{R_k}, R{R_kb}, 0x6, RZ")
        mad(q, R_k, R_warp, 0x4, R_k, R_tmp)
        mad(q, R_off, R_k, s.HWN, R_n, R_tmp)
        mad(q, R_off, R_th, 2 * s.W * s.N, R_off, R_tmp)
        mad(q, R_off, R_tw, 2 * s.N, R_off, R_tmp)
        q.op(f"SHF.L.U32 R{R_lo}, R{R_off}, 0x2, RZ")
        q.op(f"SHF.R.U32.HI R{R_hi}, RZ, 0x1e, R{R_off}")
        q.op(f"IADD3 R{R_yb}, P0, R{R_lo}, R{R_y}, RZ")
        q.op(f"IADD3.X R{R_yb + 1}, R{R_hi}, R{R_y + 1}, RZ, P0, !PT")
        need_k = s.K % BK != 0
        for r in range(2):
            if r == 1:
                q.op("BAR.SYNC.DEFER_BLOCKING 0x0")
                self.stage_round(q, 1, R_ms)
            if r == 0:
                if self.overlap:
                    q.op(f"UIADD3 UR{UR_NEXT}, UR{UR_TILE}, UR{UR_STRIDE}, URZ")
                    self.tile_setup(q, UR_NEXT, 152)
                # store predicates: P0..P3 = image, row, column in range for output (i, j)
                q.op(f"ISETP.LT.AND P4, PT, R{R_n}, {s.N:#x}, PT")
                q.op(f"ISETP.LE.AND P5, PT, R{R_th}, {signed_hex((s.H - 2) // 2)}, P4")      # row 2th+1 < H
                q.op(f"ISETP.LE.AND P6, PT, R{R_tw}, {signed_hex((s.W - 2) // 2)}, PT")      # col 2tw+1 < W
                q.op("PLOP3.LUT P0, PT, P4, PT, PT, 0x80, 0x0")
                q.op("PLOP3.LUT P1, PT, P4, P6, PT, 0x80, 0x0")
                q.op("PLOP3.LUT P2, PT, P5, PT, PT, 0x80, 0x0")
                q.op("PLOP3.LUT P3, PT, P5, P6, PT, 0x80, 0x0")
            q.op("BAR.SYNC.DEFER_BLOCKING 0x0")
            # the staging loads in two halves (filters xx = 0, 1 on barrier 0, 2, 3 on barrier 1):
            # the first half's transforms run while the second half's loads are in flight; the
            # two transforms of a half interleaved, op by op, for latency
            slots = M_SLOTS if self.o.bank_slots else PLAIN_SLOTS
            mregs = [[64 * r + 16 * xx + slots[e] for e in range(16)] for xx in range(4)]
            halves = ((0, 1), (2, 3))
            for h, xxs in enumerate(halves):
                for xx in xxs:
                    for e in range(16):
                        q.op(f"LDS R{mregs[xx][e]}, [R{R_mr}+{(e * self.es_m + xx * self.ks_m) * 4:#x}]", barriers=(h,))
            for xxs in halves:
                trans = [output_transform_ops(mregs[xx]) for xx in xxs]
                for m in range(len(trans[0][0])):
                    for ops, _ in trans:
                        q.op(ops[m])
                for xx, (_, outs) in zip(xxs, trans):
                    koff = 32 * r + xx
                    yp = R_yp[xx % 2]     # two pointers: the next one need not wait for the stores
                    q.op(f"IADD3 R{yp}, P6, R{R_yb}, {koff * s.HWN * 4:#x}, RZ")
                    q.op(f"IADD3.X R{yp + 1}, RZ, R{R_yb + 1}, RZ, P6, !PT")
                    offs = [(i * s.W + j) * s.N * 4 for i in (0, 1) for j in (0, 1)]
                    if need_k:
                        lim = s.K - koff    # k = kb*64 + warp*4 + koff < K
                        for pair in ((0, 1), (2, 3)):
                            for pp, idx in zip((4, 5), pair):
                                q.op(f"ISETP.LT.AND P{pp}, PT, R{R_k}, {signed_hex(lim)}, P{idx}")
                            for pp, idx in zip((4, 5), pair):
                                q.op(f"@P{pp} {store} {self.t.global_address(yp, offs[idx])}, R{outs[idx]}")
                    else:
                        for idx in range(4):
                            q.op(f"@P{idx} {store} {self.t.global_address(yp, offs[idx])}, R{outs[idx]}")
        if self.tile_loop:
            # every warp has read the staging area before the next tile's stores; the next tile
            q.op("BAR.SYNC.DEFER_BLOCKING 0x0")
            q.op(f"UIADD3 UR{UR_TILE}, UR{UR_TILE}, UR{UR_STRIDE}, URZ")
            q.op(f"MOV R{R_t}, UR{UR_TILE}")
            q.op(f"ISETP.LT.AND P0, PT, R{R_t}, {self.sp.units:#x}, PT")
            q.ops[-1].stall = max(q.ops[-1].stall, PRED_DIST)     # -> @P0 BRA TILE
        else:
            q.op("EXIT")
        return q

    # ---- the whole kernel ----
    def text(self, name: Optional[str] = None) -> str:
        s, o = self.s, self.o
        name = name or kernel_name(s, o)
        out = kernel_head(name, [
            f"# Winograd F(2x2,3x3) FP32 main kernel for {self.t.arch}, generated by kernels_sass/winograd/sassgen.py",
            f"# shape N={s.N} C={s.C} H={s.H} W={s.W} K={s.K}; options {options_text(o)}",
            f"# grid {s.grid() if not self.tile_loop else '(min(tiles, SMs), 1, 1): persistent over ' + str(self.sp.units) + ' units'}, "
            f"{THREADS} threads, {self.smem_bytes} bytes of dynamic shared memory"], PARAMS, o.ldgsts)
        # part 1 of the first tile's prologue (with overlap; else of every tile) and the wait
        # for its loads; in the tile loop with overlap, part 1 of the next tile runs inside the
        # epilogue
        entry = self.seq()
        if self.tile_loop:
            # persistent blocks: block b computes tiles b, b + grid, b + 2 grid, ...
            entry.op(f"S2UR UR{UR_TILE}, SR_CTAID.X")
            entry.op(f"ULDC UR{UR_STRIDE}, c[0x0][{self.t.grid_dim_x:#x}]")      # gridDim.x
            if not self.overlap:
                entry.op("NOP", wait=entry.wait_all(), y=True, stall=2)
                out += entry.lines()
                out.append("TILE:")
                entry = self.seq()
        self.tile_setup(entry, UR_TILE if self.tile_loop else None, 128)
        entry.op("NOP", wait=entry.wait_all(), y=True, stall=2)
        out += entry.lines()
        if self.overlap:
            out.append("TILE:")
        pro = self.tile_start()
        out += pro.lines()
        # The prologue's last wait: everything it left in flight must land before the loop
        # (the loop's barrier plan starts from a clean scoreboard).
        out += self.prologue_tail(pro.wait_all())
        out.append("LOOP:")
        out += [op.line() for op in self.loop_body()]
        if self.sp.active:
            head = self.epilogue_branch()
            out += head.lines()
            out.append(Op("@P0 BRA EPI_RED", wait=head.wait_all(), y=True, stall=5).line())
        for reduce in ((False, True) if self.sp.active else (False,)):
            if reduce:
                out.append("EPI_RED:")
            epi = self.epilogue(reduce)
            out += epi.lines()
            if self.tile_loop:   # the next tile starts from a clean scoreboard (stores have read their data)
                out.append(Op("@P0 BRA TILE", wait=epi.wait_all(), y=True, stall=5).line())
                out.append(Op("EXIT", y=True, stall=5).line())
        return kernel_text(self.t, out)

    def prologue_tail(self, wait: int) -> list[str]:
        """BAR (after every barrier of the prologue), the first channel's LDS on barrier 0, then
        the input loads of channel block 1 on barrier 2, as the loop expects them in flight."""
        lines = [Op("BAR.SYNC.DEFER_BLOCKING 0x0", wait=wait, y=True, stall=6).line()]
        for t in self.lds_ops(0, 0):
            lines.append(Op(t, wb=0, y=True, stall=2).line())
        # (back to back, 2 cycles apart: nothing else to interleave them with here)
        loads, _ = self.block_loads(f"ISETP.LT.AND P6, PT, R{R_C0}, R{R_CLIM}, PT", spacing=2)
        for (text, kw), (_, nxt) in zip(loads, loads[1:] + [("", {"after": 1})]):
            lines.append(Op(text, wb=kw.get("wb"), rb=kw.get("rb"), wait=kw.get("wait", 0), y=True,
                            stall=max(1, nxt["after"])).line())
        return lines


def options_text(o: Options) -> str:
    """The options as the kernel's header shows them: their repr, `buffers` only where it is not
    the default (so that a kernel's text depends on the fields its design uses)."""
    text = repr(o)
    return text.replace(", buffers=2)", ")") if o.buffers == 2 else text


def kernel_name(s: Shape, o: Options = Options()) -> str:
    return f"wino_n{s.N}_c{s.C}_h{s.H}_w{s.W}_k{s.K}_{o.tag()}".replace("-", "_")


def generate(shape: Shape, opts: Options = Options(), arch: str = DEFAULT_ARCH) -> str:
    """The kernel's SASS for `arch` (opts as given: `fit` adapts them to an arch)."""
    return Generator(shape, opts, arch).text()
