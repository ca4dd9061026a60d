"""Addresses in the code: `32@lo(x)` / `32@hi(x)`, `32@lo((k + label@srel))` (a return
address), CALL.ABS targets that name another function, and `.func` device functions.

The driver writes these at load from the cubin's `.rel(a).text.<function>` sections. CPU:
the relocations, symbols and call graph we write, per arch (types as ptxas writes them:
R_CUDA_ABS32_LO_32/HI_32, R_CUDA_ABS47_34 before Hopper, R_CUDA_ABS55_16_34 on sm_90; REL
for entries without an addend, RELA with one, all RELA on sm_90); nvdisasm's listing of our
cubin read back to the same code and relocations (oracle); `sassas disasm` -> `sassas asm`;
errors. GPU: a hand-written kernel that reads a global table through `32@lo/hi` and calls
a `.func` through CALL.ABS with a `@srel` return address; bitsandbytes' sm_90 kernels that call ptxas's `__cuda_sm20_div_u64` through
CALL.ABS and read a lookup table through `32@lo/hi`, round-tripped, compute what the
originals compute. More real code with these (the `__cuda_sm70_shflsync_*` calls of sm_70..89)
is in tests/sassas/test_realworld_corpus.py.
"""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

import sassas
from sassas.disasm import UnsupportedCubin, disassemble
from sassas.elf import STB, STT, RelocType, read_cubin
from sassas.errors import SassError
from sassas.learn import oracle

ARCHS = ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]

SOURCE = """
.global table 16 8
.init table 0x0 0x11111111
.init table 0x8 0x33333333

.kernel k
--:-:-:-:1      MOV R2, 32@lo(table);
--:-:-:-:1      MOV R3, 32@hi((table + 0x8));
--:-:-:-:1      MOV R20, 32@lo((k + back@srel));
--:-:-:-:1      MOV R21, 32@hi((k + back@srel));
--:-:-:Y:5      CALL.ABS.NOINC `(helper);
back:
--:-:-:Y:5      CALL.ABS.NOINC `(vprintf);          # no source defines it: the driver's
--:-:-:Y:5      EXIT;

.func helper
--:-:-:Y:5      RET.ABS.NODEC R20 0x0;
"""


def _call_type(arch: str) -> int:
    return RelocType.R_CUDA_ABS55_16_34 if arch == "sm_90" else RelocType.R_CUDA_ABS47_34


def _code_relocations(info) -> set[tuple]:
    return {(r.section, r.offset, r.symbol, r.type, r.addend, r.explicit)
            for r in info.relocations if r.section.startswith(".text.")}


@pytest.mark.parametrize("arch", ARCHS)
def test_relocations_symbols_and_call_graph(arch):
    info = read_cubin(sassas.assemble(SOURCE, arch, filename="r.sass").data)
    rela = arch == "sm_90"
    lo, hi = RelocType.R_CUDA_ABS32_LO_32, RelocType.R_CUDA_ABS32_HI_32
    assert _code_relocations(info) == {
        (".text.k", 0x00, "table", lo, 0, rela),
        (".text.k", 0x10, "table", hi, 8, True),          # an addend: RELA on every arch
        (".text.k", 0x20, "k", lo, 0x50, True),           # back: the instruction after the CALL
        (".text.k", 0x30, "k", hi, 0x50, True),
        (".text.k", 0x40, "helper", _call_type(arch), 0, rela),
        (".text.k", 0x50, "vprintf", _call_type(arch), 0, rela),
    }
    # The relocated fields hold 0: the driver writes them.
    code = info.kernel("k").code
    assert all(code[at + 4:at + 8] == bytes(4) for at in (0x00, 0x10, 0x20, 0x30))
    symbols = {s.name: s for s in info.symbols}
    assert (symbols["helper"].bind, symbols["helper"].type, symbols["helper"].other) == (STB.LOCAL, STT.FUNC, 0)
    assert (symbols["vprintf"].bind, symbols["vprintf"].section) == (STB.GLOBAL, 0)
    assert [k.name for k in info.kernels] == ["k"] and [f.name for f in info.functions] == ["helper"]
    graph = info.section(".nv.callgraph").data
    pairs = [tuple(int.from_bytes(graph[i + j:i + j + 4], "little", signed=True) for j in (0, 4))
             for i in range(0, len(graph), 8)]
    index = {s.name: s.index for s in info.symbols}
    assert pairs == [(0, -1), (index["k"], index["helper"]), (index["k"], index["vprintf"]),
                     (0, -2), (0, -3), (0, -4)]


@pytest.mark.parametrize("arch", ARCHS)
def test_disasm_carries_them(arch):
    original = sassas.assemble(SOURCE, arch, filename="r.sass").data
    text = disassemble(original)
    assert "32@hi((table + 0x8))" in text and "CALL.ABS.NOINC `(helper)" in text and ".func helper" in text
    rebuilt = read_cubin(sassas.assemble(text, arch, filename="again.sass").data)
    info = read_cubin(original)
    assert _code_relocations(rebuilt) == _code_relocations(info)
    for name in ("k", "helper"):
        assert rebuilt.kernel(name).code == info.kernel(name).code
    # One kernel asked for: the functions it calls come with it.
    assert ".func helper" in disassemble(original, kernel="k")


@pytest.mark.oracle
@pytest.mark.parametrize("arch", ARCHS)
def test_nvdisasm_listing_of_our_cubin_reads_back(arch, tmp_path):
    """NVIDIA's reading of our relocations is ours: its listing, fed to `sassas asm`, gives
    the same code and relocations (its `32@lo(...)`, `@srel` and `(helper)` spellings)."""
    try:
        nvdisasm = str(oracle.find_tool("nvdisasm", arch))
    except oracle.OracleMissing as e:
        pytest.skip(f"nvdisasm for {arch}: {e}")
    path = tmp_path / "r.cubin"
    path.write_bytes(sassas.assemble(SOURCE, arch, filename="r.sass").data)
    listing = subprocess.run([nvdisasm, "-hex", str(path)], capture_output=True, text=True, check=True).stdout
    assert "32@lo((k + .L_x_0@srel))" in listing and "CALL.ABS.NOINC `(vprintf)" in listing
    info, rebuilt = read_cubin(path.read_bytes()), read_cubin(sassas.assemble(listing, arch, filename="l.sass").data)
    assert rebuilt.kernel("k").code == info.kernel("k").code
    assert rebuilt.kernel("helper").code == info.kernel("helper").code and not rebuilt.kernel("helper").entry
    # (the listing does not declare `table`: it stays an undefined symbol, with the same entries)
    assert _code_relocations(rebuilt) == _code_relocations(info)


@pytest.mark.parametrize("line, message", [
    ("MOV R2, 32@mid(table);", "expected 32@lo(symbol) or 32@hi(symbol), found '32@mid'"),
    ("MOV R2, 64@lo(table);", "expected 32@lo(symbol) or 32@hi(symbol), found '64@lo'"),
    ("MOV R2, 32@lo((table - back@srel));", "a label's offset is added, not subtracted"),
    ("MOV R2, 32@lo((k + nowhere@srel));", "undefined label 'nowhere'"),
    ("MOV R2, 32@lo((helper + back@srel));", "'back@srel' with 'helper': the label must be in the same function ('k')"),
    ("BRA 32@lo(table);", "32@lo(table) needs a 32-bit immediate at bits 32..63, which the driver fills in; BRA has none there"),
])
def test_errors_name_the_place(line, message):
    source = f".global table 16\n.kernel k\n{line}\nback:\nEXIT;\n.func helper\nRET.ABS.NODEC R20 0x0;\n"
    with pytest.raises(SassError) as e:
        sassas.assemble(source, "sm_90", filename="e.sass")
    assert str(e.value).startswith("e.sass:3:") and message in str(e.value), str(e.value)


# ------------------------------------------------------------------------------ GPU

GPU_SOURCE = """
# out[i] = 2 * table[i % 4] + i: the table's address by 32@lo/32@hi, the arithmetic in a
# device function called through CALL.ABS with its return address in R20/R21.
.global table 16 8
.init table 0x0 0x11
.init table 0x4 0x22
.init table 0x8 0x33
.init table 0xc 0x44

.kernel k
<params>
out, 8
</params>
--:-:0:-:7      S2R R0, SR_TID.X;
--:-:-:-:1      ULDC.64 UR4, c[0x0][0x208];
--:-:-:-:1      MOV R2, 32@lo(table);
--:-:-:-:1      MOV R3, 32@hi(table);
01:-:-:Y:5      LOP3.LUT R6, R0, 0x3, RZ, 0xc0, !PT;
--:-:-:Y:5      IMAD.WIDE.U32 R2, R6, 0x4, R2;
--:-:1:-:2      LDG.E R8, desc[UR4][R2.64];
--:-:-:-:1      MOV R20, 32@lo((k + back@srel));
--:-:-:-:1      MOV R21, 32@hi((k + back@srel));
02:-:-:Y:5      CALL.ABS.NOINC `(twice_plus_tid);
back:
--:-:2:-:2      LDC.64 R4, out[0];
04:-:-:Y:5      IMAD.WIDE.U32 R4, R0, 0x4, R4;
--:-:-:-:1      STG.E desc[UR4][R4.64], R8;
--:-:-:Y:5      EXIT;
END:
--:-:-:Y:0      BRA END;

.func twice_plus_tid
--:-:-:Y:5      IMAD R8, R8, 0x2, R0;
--:-:-:Y:5      RET.ABS.NODEC R20 0x0;
"""


@pytest.mark.gpu
def test_gpu_global_table_and_device_function_call():
    from importlib import import_module
    L = import_module("sassas.load")        # (the package's `load` is the function)
    ok, why = L.gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    major, minor = L.compute_capability()
    if (major, minor) != (9, 0):
        pytest.skip(f"the kernel is written for sm_90; the GPU is sm_{major}{minor}")
    cubin = sassas.assemble(GPU_SOURCE, "sm_90", filename="call.sass").data
    again = sassas.assemble(disassemble(cubin), "sm_90", filename="again.sass").data
    n = 64
    want = 2 * np.array([0x11, 0x22, 0x33, 0x44], dtype=np.uint32)[np.arange(n) % 4] + np.arange(n, dtype=np.uint32)
    for name, data in (("assembled", cubin), ("disasm -> asm", again)):
        out = L.DeviceBuffer.from_numpy(np.full(n, 0xDEADBEEF, dtype=np.uint32))
        with L.load(data) as m:
            m["k"](1, n, out)
            got = out.to_numpy().view(np.uint32)
        print(f"\n[{name}] out[:6] = {got[:6].tolist()}")
        np.testing.assert_array_equal(got, want)


def test_the_checker_follows_the_call_back():
    """`sassas check` goes on after a CALL.ABS to another function (the code after it was
    unreachable to it) and finds nothing in GPU_SOURCE; with the LDC's stall back at 1,
    `sassas asm` warns of the wait one cycle later (an error with -Werror)."""
    from sassas.hazards import check
    program = sassas.assemble(GPU_SOURCE, "sm_90", filename="call.sass").program
    assert [h for h in check(program) if h.severity == "error"] == []
    bad = GPU_SOURCE.replace("--:-:2:-:2      LDC.64 R4, out[0];", "--:-:2:-:1      LDC.64 R4, out[0];")
    warnings = [w.render() for w in sassas.assemble(bad, "sm_90", filename="call.sass").warnings]
    assert any("call.sass:26:1: warning: waits on barrier 2 one cycle after LDC.64" in w
               and "give LDC.64 a stall of 2" in w for w in warnings), warnings
    with pytest.raises(SassError, match="waits on barrier 2 one cycle after LDC.64"):
        sassas.assemble(bad, "sm_90", filename="call.sass", warnings_as_errors=True)


@pytest.mark.gpu
def test_gpu_bitsandbytes_kernels_with_relocations_compute_the_same():
    """bitsandbytes' sm_90 kernels whose code holds addresses: `kfunc<float, FILL>` calls
    ptxas's `__cuda_sm20_div_u64` through CALL.ABS, the NF4 `kDequantizeBlockwise` reads its
    lookup table through `32@lo/32@hi`. Each runs from the original cubin and from
    `sassas disasm` -> `sassas asm` of it, on the same fresh random inputs: equal outputs
    (needs the corpus in .cache/realworld; skips otherwise)."""
    from importlib import import_module
    L = import_module("sassas.load")
    ok, why = L.gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    if L.compute_capability() != (9, 0):
        pytest.skip("the kernels are bitsandbytes' sm_90 build")
    import test_realworld_corpus as rw
    try:
        original = next(iter(rw.cubins("bitsandbytes").get("sm_90", [])), None)
    except rw.CorpusMissing as e:
        pytest.skip(f"bitsandbytes corpus: {e}")
    if original is None:
        pytest.skip("no sm_90 cubin in the bitsandbytes corpus")
    fill = "_Z5kfuncIfLi0EEvPT_S1_S0_l"
    dequantize = "_Z20kDequantizeBlockwiseIfLi512ELi64ELi8ELi2EEvPfPhS0_PT_ii"
    text = disassemble(original, kernel=[fill, dequantize])
    rebuilt = sassas.assemble(text, "sm_90", filename="bnb.sass").data
    info = read_cubin(rebuilt)
    assert _code_relocations(info) and info.functions, "the kernels should carry code relocations"
    rng = np.random.default_rng()
    n = 4099                                           # not a multiple of the tile
    value = np.float32(rng.standard_normal())
    packed = rng.integers(0, 256, n, dtype=np.uint8)
    absmax = rng.random(n).astype(np.float32) + 0.5
    results = {}
    for name, cubin in (("ptxas", original), ("sassas", rebuilt)):
        with L.load(cubin) as m:
            a = L.DeviceBuffer.from_numpy(np.full(n + 64, np.nan, np.float32))
            m[fill]((n + 255) // 256, 256, a, L.DeviceBuffer.from_numpy(np.zeros(4, np.float32)), value, np.int64(n))
            out = L.DeviceBuffer.from_numpy(np.full(2 * n + 1024, np.nan, np.float32))
            m[dequantize]((n + 511) // 512, 64, L.DeviceBuffer.from_numpy(np.zeros(256, np.float32)),
                          L.DeviceBuffer.from_numpy(packed), L.DeviceBuffer.from_numpy(absmax), out,
                          np.int32(64), np.int32(n))
            results[name] = (a.to_numpy(), out.to_numpy())
    filled, dequantized = results["sassas"]
    np.testing.assert_array_equal(filled[:n], np.full(n, value, np.float32))
    assert np.isnan(filled[n:]).all()
    written = ~np.isnan(dequantized)
    print(f"\n[sm_90 bitsandbytes] fill: {n} elements = {value}; NF4 dequantize: {int(written.sum())} outputs written")
    assert written.sum() >= n
    for mine, theirs in zip(results["sassas"], results["ptxas"]):
        np.testing.assert_array_equal(mine, theirs)
