"""Instruction sequences the generators share: the Winograd transforms as FADD lists, and the
index arithmetic (magic-number division, multiply-add by shifts, tile and block indices)."""
from __future__ import annotations

from typing import Optional

from .plan import Shape
from .sched import Op, Seq


def signed_hex(v: int) -> str:
    return f"-{-v:#x}" if v < 0 else f"{v:#x}"


def magic(d: int) -> int:
    """m with floor(n * m / 2^32) == n // d for 0 <= n < 2^16, d < 2^16."""
    return (1 << 32) // d + 1


# ---- the transforms as instruction lists ------------------------------------------------
def input_transform_ops(src, dst, spare):
    """B^T d B: src[16] (d, row-major 4x4) -> 16 values; returns (ops, where) with where[e] the
    register holding position e. Pass 1 writes dst[0..15] out of place (src keeps the loaded
    values: the zero padding lives there); pass 2 works in place on dst with one spare."""
    ops = []
    t = [[dst[4 * i + j] for j in range(4)] for i in range(4)]
    d = [[src[4 * i + j] for j in range(4)] for i in range(4)]
    for j in range(4):            # pass 1, per column: T = B^T d
        ops.append(f"FADD R{t[0][j]}, R{d[0][j]}, -R{d[2][j]}")
        ops.append(f"FADD R{t[1][j]}, R{d[1][j]}, R{d[2][j]}")
        ops.append(f"FADD R{t[2][j]}, R{d[2][j]}, -R{d[1][j]}")
        ops.append(f"FADD R{t[3][j]}, R{d[1][j]}, -R{d[3][j]}")
    where = [[None] * 4 for _ in range(4)]
    free = spare
    for i in range(4):            # pass 2, per row: V = T B, renaming through the spare
        r0, r1, r2, r3 = t[i]
        ops.append(f"FADD R{r0}, R{r0}, -R{r2}")          # V0 = T0 - T2
        ops.append(f"FADD R{r3}, R{r1}, -R{r3}")          # V3 = T1 - T3
        ops.append(f"FADD R{free}, R{r1}, R{r2}")         # V1 = T1 + T2
        ops.append(f"FADD R{r2}, R{r2}, -R{r1}")          # V2 = T2 - T1
        where[i] = [r0, free, r2, r3]
        free = r1
    return ops, [where[e // 4][e % 4] for e in range(16)]


def output_transform_ops(m):
    """A^T M A in place on m[16] (row-major 4x4): returns (ops, [o00, o01, o10, o11]). The
    independent columns (pass 1) and rows (pass 2) are interleaved step by step, so that an
    FADD and the one that reads its result are 4 (pass 1) or 2 (pass 2) apart."""
    ops = []
    pass1 = [[f"FADD R{m[j]}, R{m[j]}, R{m[4 + j]}", f"FADD R{m[4 + j]}, R{m[4 + j]}, -R{m[8 + j]}",
              f"FADD R{m[j]}, R{m[j]}, R{m[8 + j]}", f"FADD R{m[4 + j]}, R{m[4 + j]}, -R{m[12 + j]}"]
             for j in range(4)]
    pass2 = []
    for base in (0, 4):
        a, b, c, d = m[base:base + 4]
        pass2.append([f"FADD R{a}, R{a}, R{b}", f"FADD R{d}, R{b}, -R{d}",
                      f"FADD R{a}, R{a}, R{c}", f"FADD R{d}, R{d}, -R{c}"])
    for group in (pass1, pass2):
        for step in range(4):
            ops += [col[step] for col in group]
    return ops, [m[0], m[3], m[4], m[7]]


def f43_bt_ops(r: list[int], sp: list[int]) -> tuple[list[str], list[int]]:
    """F(4x4,3x3)'s B^T d for 6 registers in place with 4 spares (reference.BT4), for the
    fused kernel (f4fused): the ops and the registers of the 6 results."""
    r0, r1, r2, r3, r4, r5 = r
    a, b, c, f = sp
    ops = [f"FFMA R{a}, R{r2}, -4, R{r4}", f"FFMA R{b}, R{r1}, -4, R{r3}",
           f"FADD R{c}, R{r4}, -R{r2}", f"FADD R{f}, R{r3}, -R{r1}",
           f"FFMA R{r4}, R{r2}, -5, R{r4}", f"FFMA R{r5}, R{r3}, -5, R{r5}",
           f"FFMA R{r4}, R{r0}, 4, R{r4}", f"FFMA R{r5}, R{r1}, 4, R{r5}",
           f"FADD R{r0}, R{a}, R{b}", f"FADD R{r1}, R{a}, -R{b}",
           f"FFMA R{r2}, R{f}, 2, R{c}", f"FFMA R{r3}, R{f}, -2, R{c}"]
    return ops, [r4, r0, r1, r2, r3, r5]


def f43_at_ops(m: list[int], sp: list[int]) -> tuple[list[str], list[int]]:
    """F(4x4,3x3)'s A^T m for 6 registers in place with 2 spares (reference.AT4): the ops
    and the registers of the 4 results."""
    m0, m1, m2, m3, m4, m5 = m
    p, q = sp
    ops = [f"FADD R{p}, R{m1}, -R{m2}", f"FADD R{q}, R{m3}, -R{m4}",
           f"FADD R{m1}, R{m1}, R{m2}", f"FADD R{m3}, R{m3}, R{m4}",
           f"FADD R{m0}, R{m0}, R{m1}", f"FFMA R{m2}, R{q}, 2, R{p}",
           f"FADD R{m0}, R{m0}, R{m3}", f"FFMA R{m4}, R{m3}, 4, R{m1}",
           f"FFMA R{m5}, R{q}, 8, R{m5}", f"FADD R{m5}, R{m5}, R{p}"]
    return ops, [m0, m2, m4, m5]


def block_ids(q: Seq, s: "Shape", tile: Optional[str], kb: int, nb: int, pos: int, tmp: int) -> None:
    """The three indices of the tile: filter block, tile-column block, position. From the
    block index (tile None), or in the persistent tile loop from the tile number in the
    register `tile` (tile = kb + KB * (nb + NB * pos), the order of a (KB, NB, positions) grid)."""
    if tile is None:
        q.op(f"S2R R{kb}, SR_CTAID.X")
        q.op(f"S2R R{nb}, SR_CTAID.Y")
        q.op(f"S2R R{pos}, SR_CTAID.Z")
        return
    if tile != f"R{pos}":
        q.op(f"MOV R{pos}, {tile}")
    if s.KB > 1:                                         # nb <- tile / KB, kb <- tile % KB
        q.op(f"MOV R{tmp}, {magic(s.KB):#x}")
        q.op(f"IMAD.HI.U32 R{nb}, R{pos}, R{tmp}, RZ")
        mad(q, kb, nb, -s.KB, pos, tmp)
    else:
        q.op(f"MOV R{kb}, RZ")
        q.op(f"MOV R{nb}, R{pos}")
    if s.NB > 1:                                         # pos <- nb / NB, nb <- nb % NB
        q.op(f"MOV R{tmp}, {magic(s.NB):#x}")
        q.op(f"IMAD.HI.U32 R{pos}, R{nb}, R{tmp}, RZ")
        mad(q, nb, pos, -s.NB, nb, tmp)
    else:
        q.op(f"MOV R{pos}, R{nb}")
        q.op(f"MOV R{nb}, RZ")


def tile_coordinates(q: Seq, s: "Shape", tid: int, nb: int, pos: int, th: int, tw: int,
                     lane: int, warp: int, n: int, tmp: int) -> None:
    """Tile row/column from the position (pos / TW by a magic multiply), lane and warp from
    the thread index, and the batch index n of this thread (32 per block column)."""
    if s.TW == 1:
        q.op(f"MOV R{th}, R{pos}")
        q.op(f"MOV R{tw}, RZ")
    else:
        q.op(f"MOV R{th}, {magic(s.TW):#x}")
        q.op(f"IMAD.HI.U32 R{th}, R{pos}, R{th}, RZ")       # pos / TW
        mad(q, tw, th, -s.TW, pos, tmp)
    q.op(f"LOP3.LUT R{lane}, R{tid}, 0x1f, RZ, 0xc0, !PT")
    q.op(f"SHF.R.U32.HI R{warp}, RZ, 0x5, R{tid}")
    mad(q, n, nb, 0x20, lane, tmp)


def mad(q: Seq, d: int, a: int, m: int, c, tmp: int) -> None:
    """R<d> = R<a> * m + c (c: a register number or None for zero). Multiplications by powers
    of two are shifts (SHF + IADD3): nvdisasm shows IMAD by 2^k as IMAD.SHL, whose meaning we
    do not rely on."""
    cz = "RZ" if c is None else f"R{c}"
    if m > 0 and m & (m - 1) == 0:
        sh = m.bit_length() - 1
        if c is None:
            q.op(f"SHF.L.U32 R{d}, R{a}, {sh:#x}, RZ")
        else:
            q.op(f"SHF.L.U32 R{tmp}, R{a}, {sh:#x}, RZ")
            q.op(f"IADD3 R{d}, R{tmp}, {cz}, RZ")
    else:
        q.op(f"IMAD R{d}, R{a}, {signed_hex(m) if m < 0 else hex(m)}, {cz}")


def address(q: Seq, d: int, terms, base: int, tmp: int) -> None:
    """R<d> = the sum of R<a> * m over `terms` ((a, m) pairs, each by mad) + base."""
    (a, m), rest = terms[0], terms[1:]
    mad(q, d, a, m, None, tmp)
    for a, m in rest:
        mad(q, d, a, m, d, tmp)
    q.op(f"IADD3 R{d}, R{d}, {base:#x}, RZ")


def kernel_head(name: str, comments: list[str], params, ldgsts: bool = True) -> list[str]:
    """A generated kernel's first lines: its `# ` comments, .kernel and <params>, and, where it
    copies by LDGSTS, the three never-executed shared loads ptxas puts before a kernel's first
    LDGSTS (sm_80..sm_90; we do the same without knowing the reason)."""
    out = [*comments, f".kernel {name}", "<params>", *(f"{n}, {b}" for n, b in params), "</params>"]
    if ldgsts:
        out += [Op("@!PT LDS RZ, [RZ]", y=False, stall=1).line() for _ in range(3)]
    return out


def kernel_text(target, lines: list[str]) -> str:
    """A generated kernel's text: its lines, then END: (a branch to itself, as ptxas ends a
    kernel), each spelt for `target`'s arch."""
    out = [*lines, "END:", "--:-:-:Y:0      BRA END;"]
    return "\n".join(target.spell_line(line) for line in out) + "\n"
