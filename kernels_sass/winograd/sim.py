"""A functional simulator for the SASS the Winograd generator emits: the kernel's logic on the
CPU, before any GPU time is spent.

    out = simulate(text, grid, params={"x": x_chwn, "u": u, "y": y_khwn})

It executes one block at a time, all its threads (256 unless told) in lock step (NumPy vectors over threads),
for exactly the instruction subset the generators use, with its meaning on the arch the text is
for (target.Target: where shared memory starts, the parameters' and the launch geometry's
places in constant bank 0; RED as REDG; where the arch has no memory descriptor (sm_75), `[R+imm]`
global addresses with R a 64-bit pair, as `.E` makes it). What it checks
besides the arithmetic:

- every global access lies inside the buffer its pointer came from (no out-of-bounds reads,
  also from predicated-on loads), shared accesses inside the allocation and aligned;
- shared-memory races: in lock step a missing BAR cannot change a result, so each 4-byte word
  records which warp wrote/read it since the last BAR; a cross-warp write-read, read-write or
  write-write between two BARs is reported;
- reads of registers no instruction has written (per thread);
- branches are uniform over the block (the kernel's loop is).

It does not model timing: control codes are the hazard checker's job (sassas.hazards).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from sassas.operands import REGISTER_ZERO
from sassas.parse import parse_instruction

from .target import DEFAULT_ARCH, target

THREADS = 256


class SimError(RuntimeError):
    pass


@dataclass
class Buffer:
    name: str
    base: int
    data: np.ndarray          # uint8 view of the contents


class Memory:
    """Global memory: named buffers at fake, well-separated device addresses."""

    def __init__(self):
        self.buffers: list[Buffer] = []
        self.next = 0x7f0000000000

    def add(self, name: str, array: np.ndarray) -> int:
        arr = np.ascontiguousarray(array)
        raw = arr.view(np.uint8).reshape(-1).copy()
        base = self.next
        self.next += (raw.size + 0xFFFFF) // 0x100000 * 0x100000 + 0x1000000
        self.buffers.append(Buffer(name, base, raw))
        return base

    def get(self, name: str) -> np.ndarray:
        for b in self.buffers:
            if b.name == name:
                return b.data
        raise KeyError(name)

    def locate(self, addr: np.ndarray, width: int, what: str) -> tuple[Buffer, np.ndarray]:
        if addr.size == 0:
            return None, addr
        lo, hi = int(addr.min()), int(addr.max())
        for b in self.buffers:
            if b.base <= lo and hi + width <= b.base + b.data.size:
                if (addr % width).any() and width > 4:
                    raise SimError(f"{what}: misaligned {width}-byte access")
                return b, (addr - b.base).astype(np.int64)
        raise SimError(f"{what}: global access outside every buffer: [{lo:#x}, {hi + width:#x})"
                       + "".join(f"\n  {b.name}: [{b.base:#x}, {b.base + b.data.size:#x})" for b in self.buffers))


def _lop3(a, b, c, lut):
    r = np.zeros_like(a)
    for k in range(8):
        if lut >> k & 1:
            t = (a if k & 4 else ~a) & (b if k & 2 else ~b) & (c if k & 1 else ~c)
            r |= t
    return r


def _f(u32):
    return u32.view(np.float32)


def _u(f32):
    return np.asarray(f32, dtype=np.float32).view(np.uint32)


class Machine:
    def __init__(self, text: str, grid, params: dict[str, int], mem: Memory, shared_bytes: int,
                 param_sizes: list[int], threads: int = THREADS, arch: str = DEFAULT_ARCH):
        self.t = target(arch)
        self.smem_base = self.t.smem_base
        self.n = threads            # threads of a block, all in lock step
        self.grid = grid
        self.mem = mem
        self.shared_bytes = shared_bytes
        self.params = params
        self.cbank = np.zeros(0x1000, dtype=np.uint8)
        # the launch geometry: blockDim (x, y, z), then gridDim (x, y, z)
        geometry = (self.n, 1, 1) + tuple(grid)
        at = self.t.grid_dim_x - 12
        self.cbank[at:at + 24] = np.frombuffer(np.array(geometry, np.uint32).tobytes(), np.uint8)
        off = self.t.param_base
        for (name, value), size in zip(params.items(), param_sizes):
            self.cbank[off:off + size] = np.frombuffer(int(value).to_bytes(size, "little"), np.uint8)
            off += size
        self.program, self.labels = self._compile(text)
        self.race_log: list[str] = []
        self.undefined_log: list[str] = []

    # ---- decoding ----
    def _compile(self, text: str):
        prog: list[tuple[Callable, str]] = []
        labels: dict[str, int] = {}
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if re.fullmatch(r"[A-Za-z_]\w*:", line):
                labels[line[:-1]] = len(prog)
                continue
            m = re.match(r"^[-0-9]{2,6}:[-0-9]:[-0-9]:[-Yy]:[0-9a-fA-F]\s+(.*?);?\s*$", line)
            if m:
                prog.append((None, m.group(1).rstrip(";").strip()))
        return prog, labels

    # ---- operands ----
    def _src(self, op, st):
        k = op.kind
        if k == "R":
            n = op.values[0]
            v = st.zero if n == 255 else st.R[n]
            if n != 255 and not st.defined[n].all():
                st.undef.add(n)
            if "-" in op.flags:
                v = (-(v.astype(np.int64))).astype(np.uint32)
            if "~" in op.flags:
                v = ~v
            return v
        if k == "UR":
            return np.full(self.n, self._usrc(op, st), np.uint32)
        if k == "I":
            v = op.values[0]
            if isinstance(v, float):
                return np.full(self.n, np.float32(v).view(np.uint32), np.uint32)
            return np.full(self.n, v & 0xFFFFFFFF, np.uint32)
        raise SimError(f"operand kind {k} not supported")

    @staticmethod
    def _upred(op, st) -> bool:
        """A uniform predicate operand (UPT true), negated where written !UP."""
        v = True if op.values[0] == 7 else st.UP.get(op.values[0])
        if v is None:
            raise SimError(f"UP{op.values[0]} read before it is written")
        return v != ("!" in op.flags)

    def _usrc(self, op, st) -> int:
        return self._ur(st, op.values[0])

    @staticmethod
    def _ur(st, n: int) -> int:
        """UR<n> (URZ: 0)."""
        if n == REGISTER_ZERO["UR"]:
            return 0
        if n not in st.UR:
            raise SimError(f"UR{n} read before it is written")
        return st.UR[n]

    def _fsrc(self, op, st):
        k = op.kind
        if k == "R":
            n = op.values[0]
            v = np.zeros(self.n, np.float32) if n == 255 else _f(st.R[n]).copy()
            if n != 255 and not st.defined[n].all():
                st.undef.add(n)
        elif k == "I":
            v = np.full(self.n, np.float32(op.values[0]), np.float32)
        else:
            raise SimError(f"float operand kind {k}")
        if "-" in op.flags:
            v = -v
        return v

    def _pred(self, op, st):
        n = op.values[0]
        v = np.ones(self.n, bool) if n == 7 else st.P[n].copy()
        if "!" in op.flags:
            v = ~v
        return v

    def _write(self, st, n, val, g):
        if n == 255:
            return
        st.R[n] = np.where(g, val.astype(np.uint32), st.R[n])
        st.defined[n] |= g

    # ---- shared memory ----
    def _global(self, memop, st, g, width, what):
        """(buffer, byte indexes) of a global access by the threads in g: `desc[UR][R.64+off]`,
        or `[R.U32+UR+off]` (a 64-bit base in UR, plus the register's 32-bit offset)."""
        if memop.kind == "[R+UR+I]" and ".U32" in memop.flags:
            areg, ureg, off = memop.values
            if not st.defined[areg][g].all():
                raise SimError(f"{what}: undefined address register")
            base = self._ur(st, ureg) | self._ur(st, ureg + 1) << 32
            addr = st.R[areg].astype(np.uint64) + np.uint64(base)
            return self.mem.locate((addr.astype(np.int64) + off)[g], width, what)
        if memop.kind == "desc[UR][R.64+I]":
            areg, off = memop.values[1], memop.values[2]
        elif memop.kind == "[R+I]" and self.t.desc is None:      # (.E: a 64-bit register pair)
            areg, off = memop.values
        else:
            raise SimError(f"{what}: address form {memop.kind} not modelled on {self.t.arch}")
        if not (st.defined[areg][g].all() and st.defined[areg + 1][g].all()):
            raise SimError(f"{what}: undefined address register")
        addr = st.R[areg].astype(np.uint64) | (st.R[areg + 1].astype(np.uint64) << np.uint64(32))
        return self.mem.locate((addr.astype(np.int64) + off)[g], width, what)

    def _smem_index(self, addr, width, what):
        if (addr % width).any():
            raise SimError(f"{what}: misaligned shared access")
        base = self.smem_base
        if (addr < base).any() or (addr + width > base + self.shared_bytes).any():
            raise SimError(f"{what}: shared access outside [{base:#x}, {base + self.shared_bytes:#x})")
        return ((addr - base) // 4).astype(np.int64)

    def _race(self, st, words, g, write: bool, what: str):
        warps = np.arange(self.n) // 32
        for k in range(words.shape[1]):
            w = words[g, k]
            wp = warps[g]
            ep = st.epoch
            # write by another warp in this epoch?
            ww = st.w_epoch[w] == ep
            bad = ww & (st.w_warp[w] != wp)
            if bad.any():
                self.race_log.append(f"{what}: {'write' if write else 'read'} after another warp's write "
                                     f"without a BAR (word {int(w[bad][0])})")
            if write:
                rr = (st.r_epoch[w] == ep) & ((st.r_warps[w] & ~(np.uint32(1) << wp.astype(np.uint32))) != 0)
                if rr.any():
                    self.race_log.append(f"{what}: write after another warp's read without a BAR "
                                         f"(word {int(w[rr][0])})")
                st.w_epoch[w] = ep
                st.w_warp[w] = wp
            else:
                fresh = st.r_epoch[w] != ep
                st.r_warps[w[fresh]] = 0
                st.r_epoch[w] = ep
                np.bitwise_or.at(st.r_warps, w, (np.uint32(1) << wp.astype(np.uint32)))

    # ---- execution ----
    def run(self, max_steps: int = 10_000_000):
        gx, gy, gz = self.grid
        for bz in range(gz):
            for by in range(gy):
                for bx in range(gx):
                    self.run_block((bx, by, bz), max_steps)

    def run_block(self, ctaid, max_steps):
        st = _State(self.shared_bytes, self.n)
        st.ctaid = ctaid
        pc = 0
        steps = 0
        parsed = self._parsed()
        while True:
            steps += 1
            if steps > max_steps:
                raise SimError("too many steps")
            inst, text = parsed[pc]
            g = np.ones(self.n, bool)
            if inst.predicate is not None:
                g = self._pred(inst.predicate, st)
            op = inst.opcode
            if op == "EXIT":
                if not g.all():
                    raise SimError("divergent EXIT")
                break
            if op == "BRA":
                if g.any() and not g.all():
                    raise SimError(f"divergent branch: {text}")
                if g.all():
                    target = text.split()[-1]
                    pc = self.labels[target]
                    continue
                pc += 1
                continue
            if not g.any():         # (e.g. the never-executed `@!PT LDS RZ, [RZ]`)
                pc += 1
                continue
            st.undef = set()
            self._exec(inst, text, st, g)
            if st.undef:
                self.undefined_log.append(f"{text}: reads never-written R{sorted(st.undef)}")
            pc += 1

    def _parsed(self):
        if not hasattr(self, "_cache"):
            out = []
            for _, text in self.program:
                t = text
                if re.search(r"\bBRA\b", t):
                    # labels are not numbers: parse a stand-in
                    pred = t.split("BRA")[0]
                    inst = parse_instruction(pred + "BRA 0x0 ;")
                else:
                    inst = parse_instruction(t + " ;")
                out.append((inst, t))
            self._cache = out
        return self._cache

    def _hmma(self, mods, ops, st, g, text):
        """HMMA.1688.F32.TF32 or HMMA.16816.F32 (FP16 operands) D, A, B, C of every warp (all
        lanes active)."""
        mma = {("1688", "F32", "TF32"): _mma_1688_tf32, ("16816", "F32"): _mma_16816_f16}.get(tuple(mods))
        if mma is None or not g.all():
            raise SimError(f"{text}: only an unpredicated HMMA.1688.F32.TF32 or HMMA.16816.F32 is modelled")
        d, a, b, c = (o.values[0] for o in ops[:4])
        for n in (a, a + 1, a + 2, a + 3, b, b + 1, c, c + 1, c + 2, c + 3):
            if not st.defined[n].all():
                st.undef.add(n)
        out = np.zeros((4, self.n), np.uint32)
        for w in range(0, self.n, 32):
            lanes = slice(w, w + 32)
            res = mma([st.R[a + k][lanes] for k in range(4)], [st.R[b + k][lanes] for k in range(2)],
                      [st.R[c + k][lanes] for k in range(4)])
            for k in range(4):
                out[k, lanes] = res[k]
        for k in range(4):
            self._write(st, d + k, out[k], g)

    def _exec(self, inst, text, st, g):
        op, mods, ops = inst.opcode, inst.modifiers, inst.operands
        if op == "S2R":
            sr = ops[1].values[0]
            if sr == "SR_TID.X":
                v = np.arange(self.n, dtype=np.uint32)
            elif sr.startswith("SR_CTAID."):
                v = np.full(self.n, st.ctaid["XYZ".index(sr[-1])], np.uint32)
            else:
                raise SimError(f"S2R {sr}")
            self._write(st, ops[0].values[0], v, g)
        elif op == "S2UR":
            sr = ops[1].values[0]
            if not sr.startswith("SR_CTAID."):
                raise SimError(f"S2UR {sr}")
            st.UR[ops[0].values[0]] = st.ctaid["XYZ".index(sr[-1])]
        elif op in ("ULDC", "LDCU") and (ops[1].values[1] != self.t.desc or "64" not in mods):
            # (the memory descriptor is not modelled: its UR pair stays unset)
            off = ops[1].values[1]
            for k in range(2 if "64" in mods else 1):
                st.UR[ops[0].values[0] + k] = int.from_bytes(self.cbank[off + 4 * k:off + 4 * k + 4].tobytes(), "little")
        elif op in ("UMOV", "ULOP3"):
            vals = [x.values[0] & 0xFFFFFFFF if x.kind == "I" else self._usrc(x, st) for x in ops[1:4]]
            if op == "ULOP3":
                vals = [int(_lop3(*(np.array([v], np.uint32) for v in vals), ops[4].values[0])[0])]
            st.UR[ops[0].values[0]] = vals[0]
        elif op == "UIADD3":
            # carries: without .X the first UP operand is the carry-out (Blackwell writes a second,
            # UPT); with .X the UP operands are carries in (a 64-bit add's high word)
            srcs = [x for x in ops[1:] if x.kind != "UP"]
            ups = [x for x in ops[1:] if x.kind == "UP"]
            if len(srcs) != 3:
                raise SimError(f"{text}: not modelled")
            v = sum(x.values[0] & 0xFFFFFFFF if x.kind == "I" else self._usrc(x, st) for x in srcs)
            if "X" in mods:
                v += sum(int(self._upred(x, st)) for x in ups)
            elif ups and ups[0].values[0] != 7:
                st.UP[ups[0].values[0]] = bool(v >> 32 & 1)
            st.UR[ops[0].values[0]] = v & 0xFFFFFFFF
        elif op in ("ULDC", "LDCU", "NOP", "BAR"):
            if op == "BAR":
                if not g.all():
                    raise SimError("BAR under a guard")
                st.epoch += 1
        elif op == "LDC":
            off = ops[1].values[1]
            n = 2 if "64" in mods else 1
            for k in range(n):
                word = int.from_bytes(self.cbank[off + 4 * k:off + 4 * k + 4].tobytes(), "little")
                self._write(st, ops[0].values[0] + k, np.full(self.n, word, np.uint32), g)
        elif op == "MOV":
            self._write(st, ops[0].values[0], self._src(ops[1], st), g)
        elif op == "IMAD":
            a = self._src(ops[1], st).astype(np.uint64)
            b = self._src(ops[2], st).astype(np.uint64)
            c = self._src(ops[3], st).astype(np.uint64)
            if "HI" in mods:
                v = ((a * b) >> np.uint64(32)) + c
            else:
                if mods:
                    raise SimError(f"IMAD.{'.'.join(mods)} not modelled")
                v = a * b + c
            self._write(st, ops[0].values[0], (v & np.uint64(0xFFFFFFFF)).astype(np.uint32), g)
        elif op == "IADD3":
            d = ops[0].values[0]
            rest = list(ops[1:])
            carry_out = None
            if rest[0].kind == "P" and rest[1].kind == "P" and "X" not in mods:
                # (Blackwell: both carry-outs written; the second, of a 3-input sum, unused: PT)
                if rest[1].values[0] != 7:
                    raise SimError(f"{text}: the second carry-out is not modelled")
                del rest[1]
            elif rest[0].kind == "P" and rest[1].kind == "P":
                del rest[:2]                # IADD3.X's carry-outs, PT, PT
            if rest[0].kind == "P":
                carry_out = rest.pop(0).values[0]
            if "X" in mods:
                a, b, c = (self._src(x, st).astype(np.uint64) for x in rest[:3])
                cin = self._pred(rest[3], st).astype(np.uint64)
                v = a + b + c + cin
            else:
                a, b, c = (self._src(x, st).astype(np.uint64) for x in rest[:3])
                v = a + b + c
            if carry_out is not None and carry_out != 7:
                st.P[carry_out] = np.where(g, (v >> np.uint64(32)) & np.uint64(1) != 0, st.P[carry_out])
            self._write(st, d, (v & np.uint64(0xFFFFFFFF)).astype(np.uint32), g)
        elif op == "SHF":
            d = ops[0].values[0]
            lo = self._src(ops[1], st)
            sh = int(ops[2].values[0])
            hi = self._src(ops[3], st)
            if mods == ("L", "U32"):
                v = (lo.astype(np.uint64) << np.uint64(sh)) & np.uint64(0xFFFFFFFF)
            elif mods == ("R", "U32", "HI"):
                v = hi.astype(np.uint64) >> np.uint64(sh)
            elif mods == ("R", "S32", "HI"):
                v = (hi.view(np.int32).astype(np.int64) >> sh).astype(np.uint64) & np.uint64(0xFFFFFFFF)
            else:
                raise SimError(f"SHF.{'.'.join(mods)}")
            self._write(st, d, v.astype(np.uint32), g)
        elif op == "LOP3":
            if ops[0].kind == "P":
                a, b, c = (self._src(x, st) for x in ops[2:5])
                r = _lop3(a, b, c, ops[5].values[0])
                p = ops[0].values[0]
                if p != 7:
                    st.P[p] = np.where(g, r != 0, st.P[p])
            else:
                a, b, c = (self._src(x, st) for x in ops[1:4])
                self._write(st, ops[0].values[0], _lop3(a, b, c, ops[4].values[0]), g)
        elif op == "R2P":
            # R2P PR, Rx{.B1,.B2,.B3}, mask: predicate Pi = bit i of the selected byte, for the
            # bits set in mask (P0..P6; PT is not writable)
            byte = next((int(f[2]) for f in ops[1].flags if f in (".B1", ".B2", ".B3")), 0)
            v = self._src(ops[1], st) >> np.uint32(8 * byte)
            mask = ops[2].values[0]
            for p in range(7):
                if mask >> p & 1:
                    st.P[p] = np.where(g, (v >> np.uint32(p)) & np.uint32(1) != 0, st.P[p])
        elif op == "PLOP3":
            a, b, c = (self._pred(x, st) for x in ops[2:5])
            lut = ops[5].values[0]
            r = np.zeros(self.n, bool)
            for k in range(8):
                if lut >> k & 1:
                    r |= (a if k & 4 else ~a) & (b if k & 2 else ~b) & (c if k & 1 else ~c)
            p = ops[0].values[0]
            st.P[p] = np.where(g, r, st.P[p])
        elif op == "ISETP":
            cmp, unsigned = mods[0], "U32" in mods
            a, b = self._src(ops[2], st), self._src(ops[3], st)
            if not unsigned:
                a, b = a.view(np.int32), b.view(np.int32)
            r = {"LT": a < b, "LE": a <= b, "GT": a > b, "GE": a >= b, "EQ": a == b, "NE": a != b}[cmp]
            if "AND" not in mods:
                raise SimError(f"ISETP {mods}")
            r = r & self._pred(ops[4], st)
            p = ops[0].values[0]
            if p != 7:
                st.P[p] = np.where(g, r, st.P[p])
        elif op == "SEL":
            a, b = self._src(ops[1], st), self._src(ops[2], st)
            self._write(st, ops[0].values[0], np.where(self._pred(ops[3], st), a, b), g)
        elif op == "FADD":
            v = self._fsrc(ops[1], st) + self._fsrc(ops[2], st)
            self._write(st, ops[0].values[0], _u(v), g)
        elif op == "FMUL":
            v = self._fsrc(ops[1], st) * self._fsrc(ops[2], st)
            self._write(st, ops[0].values[0], _u(v), g)
        elif op == "F2FP":
            # F2FP.F16.F32.PACK_AB d, b, a: a to the low half, b to the high, each rounded to FP16
            # (to nearest even)
            if mods != ("F16", "F32", "PACK_AB"):
                raise SimError(f"F2FP.{'.'.join(mods)} not modelled")
            half = lambda x: self._fsrc(x, st).astype(np.float16).view(np.uint16).astype(np.uint32)
            self._write(st, ops[0].values[0], half(ops[2]) | (half(ops[1]) << np.uint32(16)), g)
        elif op == "HADD2":
            # HADD2.F32 d, -RZ, r.H0_H0 (or .H1_H1): one FP16 half of r as FP32
            src = ops[2]
            if mods != ("F32",) or ops[1].values[0] != 255 or not src.flags & {".H0_H0", ".H1_H1"}:
                raise SimError(f"{text}: only HADD2.F32 of -RZ and one half is modelled")
            shift = np.uint32(16 if ".H1_H1" in src.flags else 0)
            h = ((self._src(src, st) >> shift) & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16)
            self._write(st, ops[0].values[0], _u(h.astype(np.float32)), g)
        elif op == "VIMNMX":
            # signed 32-bit min (PT) or max (!PT)
            a, b = self._src(ops[1], st).view(np.int32), self._src(ops[2], st).view(np.int32)
            pick_min = self._pred(ops[3], st)
            self._write(st, ops[0].values[0], np.where(pick_min, np.minimum(a, b), np.maximum(a, b)).view(np.uint32), g)
        elif op == "FFMA":
            a = self._fsrc(ops[1], st).astype(np.float64)
            b = self._fsrc(ops[2], st).astype(np.float64)
            c = self._fsrc(ops[3], st).astype(np.float64)
            self._write(st, ops[0].values[0], _u((a * b + c).astype(np.float32)), g)
        elif op == "CS2R":
            if not text.rstrip().endswith("SRZ"):
                raise SimError(f"{text}: only CS2R of SRZ (zeros to a register pair) is modelled")
            for k in range(2):
                self._write(st, ops[0].values[0] + k, np.zeros(self.n, np.uint32), g)
        elif op == "HMMA":
            self._hmma(mods, ops, st, g, text)
        elif op in ("LDG", "STG"):
            width = 16 if "128" in mods else 8 if "64" in mods else 4
            memop = ops[1] if op == "LDG" else ops[0]
            buf, idx = self._global(memop, st, g, width, text)
            if buf is None:
                return
            if op == "LDG":
                d = ops[0].values[0]
                for k in range(width // 4):
                    words = np.zeros(self.n, np.uint32)
                    sel = idx + 4 * k
                    words[g] = buf.data.view(np.uint8)[sel[:, None] + np.arange(4)].copy().view(np.uint32).reshape(-1)
                    self._write(st, d + k, words, g)
            else:
                s = ops[1].values[0]
                for k in range(width // 4):
                    vals = st.R[s + k][g]
                    b4 = vals.view(np.uint8).reshape(-1, 4)
                    for bb in range(4):
                        buf.data[idx + 4 * k + bb] = b4[:, bb]
        elif op == self.t.reduce:
            # REDG.E.ADD.F32...: y[addr] += value, as float32 (blocks run one after the other)
            if "ADD" not in mods or "F32" not in mods:
                raise SimError(f"REDG.{'.'.join(mods)} not modelled")
            buf, idx = self._global(ops[0], st, g, 4, text)
            if buf is None:
                return
            if (idx % 4).any():
                raise SimError(f"{text}: misaligned 4-byte access")
            words = buf.data.view(np.float32)
            np.add.at(words, idx // 4, _f(st.R[ops[1].values[0]][g].copy()))
        elif op == "LDGSTS":
            # global -> shared, modelled as done at issue (the kernel waits for it with
            # LDGDEPBAR/DEPBAR before the BAR that publishes it); a shared write for the race check
            width = 16 if "128" in mods else 8 if "64" in mods else 4
            sreg, soff = ops[0].values[0], ops[0].values[1]
            if not st.defined[sreg][g].all():
                raise SimError(f"{text}: undefined address register")
            buf, idx = self._global(ops[1], st, g, width, text)
            widx = self._smem_index(st.R[sreg].astype(np.int64)[g] + soff, width, text)
            words = widx[:, None] + np.arange(width // 4)[None, :]
            self._race(st, words, g, True, text)
            if buf is not None:
                src = buf.data.view(np.uint8)[idx[:, None] + np.arange(width)].copy()
                st.smem[words] = src.view(np.uint32).reshape(len(idx), width // 4)
        elif op in ("LDGDEPBAR", "DEPBAR"):
            pass
        elif op in ("LDS", "STS"):
            width = 16 if "128" in mods else 8 if "64" in mods else 4
            memop = ops[1] if op == "LDS" else ops[0]
            areg, off = memop.values[0], memop.values[-1]
            if not st.defined[areg][g].all():
                raise SimError(f"{text}: undefined address register")
            addr = st.R[areg].astype(np.int64) + off
            if memop.kind == "[R+UR+I]":        # a uniform part: [R + UR + imm]
                addr += self._ur(st, memop.values[1])
            ag = addr[g]
            widx = self._smem_index(ag, width, text)
            words = widx[:, None] + np.arange(width // 4)[None, :]
            if op == "LDS":
                self._race(st, words, g, False, text)
                d = ops[0].values[0]
                for k in range(width // 4):
                    v = np.zeros(self.n, np.uint32)
                    v[g] = st.smem[words[:, k]]
                    self._write(st, d + k, v, g)
            else:
                self._race(st, words, g, True, text)
                s = ops[1].values[0]
                for k in range(width // 4):
                    st.smem[words[:, k]] = st.R[s + k][g]
        else:
            raise SimError(f"opcode {op} not modelled: {text}")


def _mma_1688_tf32(a, b, c):
    """One warp's mma.sync m16n8k8 TF32 on its lanes' fragments: a [4][32], b [2][32], c [4][32]
    uint32 (lane = 4 g + q; A rows g, g + 8 at columns q, q + 4; B rows q, q + 4 at column g; C
    rows g, g + 8 at columns 2q, 2q + 1). The operands are read as TF32 (their low 13 bits
    dropped), the products summed in float64 and rounded to FP32 once (the tensor core's exact
    rounding is not modelled)."""
    tf = lambda v: (v & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    g, q = np.arange(32) // 4, np.arange(32) % 4
    A, B, C = np.zeros((16, 8)), np.zeros((8, 8)), np.zeros((16, 8))
    for k, (r, col) in enumerate(((g, q), (g + 8, q), (g, q + 4), (g + 8, q + 4))):
        A[r, col] = tf(a[k])
    for k, r in enumerate((q, q + 4)):
        B[r, g] = tf(b[k])
    for k, (r, col) in enumerate(((g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q), (g + 8, 2 * q + 1))):
        C[r, col] = c[k].view(np.float32)
    D = (A @ B + C).astype(np.float32)
    return [D[r, col].view(np.uint32) for r, col in ((g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q), (g + 8, 2 * q + 1))]


def _mma_16816_f16(a, b, c):
    """One warp's mma.sync m16n8k16 FP16 -> FP32: a [4][32] (half2 words: A rows g, g + 8 at
    columns 2q and 2q + 1, then 2q + 8 and 2q + 9), b [2][32] (B rows 2q, 2q + 1 at column g,
    then 2q + 8, 2q + 9), c [4][32] as m16n8k8's. FP16 products are exact in float64; the sum is
    rounded to FP32 once."""
    halves = lambda w: [(w & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16).astype(np.float64),
                        (w >> np.uint32(16)).astype(np.uint16).view(np.float16).astype(np.float64)]
    g, q = np.arange(32) // 4, np.arange(32) % 4
    A, B, C = np.zeros((16, 16)), np.zeros((16, 8)), np.zeros((16, 8))
    for k, (r, col) in enumerate(((g, 2 * q), (g + 8, 2 * q), (g, 2 * q + 8), (g + 8, 2 * q + 8))):
        lo, hi = halves(a[k])
        A[r, col], A[r, col + 1] = lo, hi
    for k, r in enumerate((2 * q, 2 * q + 8)):
        lo, hi = halves(b[k])
        B[r, g], B[r + 1, g] = lo, hi
    for k, (r, col) in enumerate(((g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q), (g + 8, 2 * q + 1))):
        C[r, col] = c[k].view(np.float32)
    D = (A @ B + C).astype(np.float32)
    return [D[r, col].view(np.uint32) for r, col in ((g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q), (g + 8, 2 * q + 1))]


class _State:
    def __init__(self, shared_bytes, threads: int = THREADS):
        self.R = np.zeros((256, threads), np.uint32)
        self.defined = np.zeros((256, threads), bool)
        self.P = np.zeros((7, threads), bool)
        self.zero = np.zeros(threads, np.uint32)
        nwords = shared_bytes // 4
        self.smem = np.full(nwords, 0x7FC00001, np.uint32)     # NaN: reads of unwritten data show
        self.w_epoch = np.full(nwords, -1, np.int64)
        self.w_warp = np.full(nwords, -1, np.int64)
        self.r_epoch = np.full(nwords, -1, np.int64)
        self.r_warps = np.zeros(nwords, np.uint32)
        self.epoch = 0
        self.ctaid = (0, 0, 0)
        self.UR: dict[int, int] = {}
        self.UP: dict[int, bool] = {}
        self.undef = set()


def simulate(text: str, grid, buffers: dict[str, np.ndarray], param_order: list[tuple[str, int]],
             shared_bytes: int, threads: int = THREADS, arch: str = DEFAULT_ARCH
             ) -> tuple[dict[str, np.ndarray], Machine]:
    """Run the kernel for `arch` on copies of `buffers` (name -> array); returns the final
    contents (uint8 views reshaped by the caller) and the machine (race_log, undefined_log)."""
    mem = Memory()
    params = {}
    for name, _size in param_order:
        params[name] = mem.add(name, buffers[name])
    m = Machine(text, grid, params, mem, shared_bytes, [s for _n, s in param_order], threads, arch)
    m.run()
    return {name: mem.get(name) for name, _ in param_order}, m
