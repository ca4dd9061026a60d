"""Module data through `sassas disasm` -> `sassas asm`: global variables, module constant
banks and their relocations.

A small PTX module (global `msg` with an initialiser, a table of its addresses, a zeroed
counter, a `.visible` initialised word) is compiled by ptxas 12.9 for every arch: ptxas puts
the addresses the kernel uses in the module's constant bank 4 with R_CUDA_64 relocations, and
the table's entries in `.nv.global.init` with R_CUDA_G64. The round trip must give the same
code, the same data, the same symbols and the same relocations; NVIDIA's tools must read the
result without complaint; NVRTC 13 (CUDA 13 dialect) output round-trips with the same section
layout. The source syntax and its errors are tested without any tool.

The GPU check (skips without a GPU) loads the ptxas cubin and the round-tripped one, runs the
kernel in both and compares what it read through the relocated addresses; it also loads the
round-tripped torchvision/torchaudio cubins of the device's arch when the real-world corpus is
cached (tests/sassas/test_realworld_corpus.py). On the GPU machine:

    python -m pytest tests/sassas/test_module_data.py -m gpu -ra -s
"""
from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

import sassas
from sassas.disasm import UnsupportedCubin, disassemble
from sassas.elf import STB, STT, ModuleImage, RelocType, read_cubin, read_module, write_cubin
from sassas.errors import SassError
from sassas.learn import oracle

ARCHS = ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]

PTX = """
.version 8.0
.target {arch}
.address_size 64

.global .align 4 .b8 msg[6] = {{104, 101, 108, 108, 111, 0}};
.global .align 8 .u64 tbl[2] = {{msg, msg}};
.global .align 4 .u32 counter;
.visible .global .align 4 .u32 seen = 7;

.visible .entry k(.param .u64 out)
{{
    .reg .b64 %rd<10>;
    .reg .b32 %r<10>;
    .reg .pred %p<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u64 %rd3, msg;
    ld.global.u32 %r1, [%rd3];
    st.global.u32 [%rd2], %r1;
    ld.global.u8 %r2, [%rd3+4];
    st.global.u32 [%rd2+4], %r2;
    ld.global.u64 %rd4, [tbl];
    cvta.global.u64 %rd6, %rd3;
    setp.eq.u64 %p1, %rd4, %rd6;
    selp.u32 %r3, 1, 0, %p1;
    st.global.u32 [%rd2+8], %r3;
    ld.global.u64 %rd5, [tbl+8];
    setp.eq.u64 %p2, %rd5, %rd4;
    selp.u32 %r4, 1, 0, %p2;
    st.global.u32 [%rd2+12], %r4;
    atom.global.add.u32 %r5, [counter], 1;
    st.global.u32 [%rd2+16], %r5;
    ld.global.u32 %r6, [seen];
    st.global.u32 [%rd2+20], %r6;
    ld.u8 %r7, [%rd4+1];
    st.global.u32 [%rd2+24], %r7;
    mov.u64 %rd7, counter;
    setp.ne.u64 %p3, %rd7, 0;
    selp.u32 %r8, 1, 0, %p3;
    st.global.u32 [%rd2+28], %r8;
    ret;
}}
"""
# What the kernel writes (one thread, first launch): "hell", 'o', tbl[0] == generic &msg,
# tbl[1] == tbl[0], counter's old value, seen, msg[1] read through tbl[0], &counter != 0.
EXPECTED = [0x6C6C6568, 0x6F, 1, 1, 0, 7, ord("e"), 1]


EMPTY_PTX = """.version 8.0
.target {arch}
.address_size 64
.visible .entry nothing()
{{
  ret;
}}
"""


def _ptxas_cubin(arch: str) -> bytes:
    try:
        oracle.find_tool("ptxas", arch)
    except oracle.OracleMissing as e:
        pytest.skip(f"ptxas (test extra) is not installed: {e}")
    cubin = oracle.compile_ptx(PTX.format(arch=arch), arch)
    if cubin is None and oracle.compile_ptx(EMPTY_PTX.format(arch=arch), arch) is None:
        # e.g. a CUDA 13 ptxas on PATH (the GPU machine), which has dropped sm_70
        pytest.skip(f"the ptxas found ({oracle.find_tool('ptxas', arch)}) cannot build {arch} at all")
    assert cubin is not None, "ptxas refused the test PTX"
    return cubin


def _round_trip(cubin: bytes) -> tuple[str, bytes]:
    info = read_cubin(cubin)
    text = disassemble(cubin, source_name="module_data.cubin")
    return text, sassas.assemble(text, info.arch, filename="module_data.sass").data


def _objects(info) -> set:
    """The global variables' symbols: name, binding, section name, value, size (sm_90's
    undefined `.nv.reservedSmem.offset0` is no module data)."""
    return {(s.name, s.bind, info.sections[s.section].name, s.value, s.size)
            for s in info.symbols if s.type == STT.OBJECT and info.sections[s.section].name.startswith(".nv.global")}


def _relocations(info) -> set:
    """Relocations of module data, by section, offset, symbol, type, addend."""
    return {(r.section, r.offset, r.symbol, r.type, r.addend) for r in info.relocations
            if not r.section.endswith("debug_frame")}


@pytest.mark.oracle
@pytest.mark.parametrize("arch", ARCHS)
def test_ptxas_module_data_round_trips(arch):
    original = _ptxas_cubin(arch)
    a = read_cubin(original)
    # What ptxas made: the premise of the test.
    assert {r[0] for r in _relocations(a)} == {".nv.constant4", ".nv.global.init"}
    assert {r[3] for r in _relocations(a)} == {RelocType.R_CUDA_64, RelocType.R_CUDA_G64}
    text, rebuilt = _round_trip(original)
    assert ".moduleconst 4 0x" in text and ".init tbl 0x0 &msg" in text and ".visible seen" in text
    b = read_cubin(rebuilt)
    assert b.kernel("k").code == a.kernel("k").code
    assert read_module(b) == read_module(a)
    assert _objects(b) == _objects(a)
    assert _relocations(b) == _relocations(a)
    for name in (".nv.constant4", ".nv.global.init"):
        assert b.section(name).data == a.section(name).data, name
    assert b.section(".nv.global").size == a.section(".nv.global").size
    # REL before sm_90 (with ptxas's .nv.rel.action beside it), RELA on sm_90, like ptxas.
    kind = ".rela" if arch == "sm_90" else ".rel"
    assert {s.name for s in b.sections if s.name.startswith(".rel") and "debug" not in s.name} == \
        {kind + ".nv.constant4", kind + ".nv.global.init"}
    assert (b.section(".nv.rel.action") is not None) == (a.section(".nv.rel.action") is not None)


CUDA_SOURCE = r"""
__device__ char msg[6] = "hello";
__device__ char* tbl[2] = {msg, msg};
__device__ unsigned counter;
extern "C" __global__ void k(unsigned long long* out) {
  out[0] = (unsigned long long)msg;
  out[1] = (unsigned long long)tbl[threadIdx.x];
  out[2] = atomicAdd(&counter, 1);
}
"""


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
def test_nvrtc_module_data_round_trips(arch):
    """NVRTC 13 (the CUDA 13 dialect, `__device__` globals) lays module data out as ptxas 12.9
    does, and as sassas writes it: same sections, types, flags, alignment, sizes."""
    from sassas import nvrtc
    ok, why = nvrtc.available()
    if not ok:
        pytest.skip(f"NVRTC is not available: {why}")
    original = nvrtc.compile_cuda(CUDA_SOURCE, arch)
    a = read_cubin(original)
    b = read_cubin(_round_trip(original)[1])
    assert b.kernel("k").code == a.kernel("k").code
    assert read_module(b) == read_module(a) and _relocations(b) == _relocations(a)
    module_sections = [s.name for s in a.sections if s.name.startswith((".nv.global", ".nv.constant4", ".nv.rel.",
                                                                        ".rel.nv.", ".rela.nv."))]
    assert len(module_sections) >= 4
    for name in module_sections:
        x, y = a.section(name), b.section(name)
        assert y is not None, name
        assert (x.type, x.flags, x.align, x.entsize, x.size) == (y.type, y.flags, y.align, y.entsize, y.size), name
    assert [n for n in module_sections if n.startswith(".rel")] == (
        [".rela.nv.constant4", ".rela.nv.global.init"] if arch == "sm_90" else [".rel.nv.constant4", ".rel.nv.global.init"])


def _tool_complaints(arch: str, data: bytes) -> list[str]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.cubin"
        path.write_bytes(data)
        for tool, args in (("cuobjdump", ["-elf"]), ("nvdisasm", [])):
            try:
                exe = oracle.find_tool(tool, arch)
            except oracle.OracleMissing as e:
                pytest.skip(f"{tool} for {arch} is not installed: {e}")
            proc = subprocess.run([str(exe), *args, str(path)], capture_output=True, text=True)
            text = proc.stdout + proc.stderr
            if proc.returncode != 0:
                out.append(f"{tool} exit {proc.returncode}: {proc.stderr.strip()[:200]}")
            out += [f"{tool}: {line}" for line in text.splitlines()
                    if any(w in line.lower() for w in ("warning", "error", "invalid", "unknown relocation"))]
    return out


@pytest.mark.oracle
@pytest.mark.parametrize("arch", ARCHS)
def test_nvidia_tools_read_the_rebuilt_cubin(arch):
    _text, rebuilt = _round_trip(_ptxas_cubin(arch))
    assert _tool_complaints(arch, rebuilt) == []
    # cuobjdump names our relocations as it names ptxas's.
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.cubin"
        path.write_bytes(rebuilt)
        listing = subprocess.run([str(oracle.find_tool("cuobjdump", arch)), "-elf", str(path)],
                                 capture_output=True, text=True).stdout
    assert "msg    R_CUDA_64" in listing and "msg    R_CUDA_G64" in listing


# ---------------------------------------------------------------- the source syntax, no tools

SOURCE = """\
.arch sm_80
.global tbl 16 8
.init tbl 0x0 &msg
.init tbl 0x8 &msg+2
.global msg 6 4
.init msg 0x0 0x6c6c6568
.init msg 0x4 0x6f
.global counter 4 4
.global flags 8 8 0x10
.weak counter
.visible msg
.moduleconst 4 0x0 &msg
.moduleconst 4 0x8 &counter
.moduleconst 4 0x10 0x12345678
.moduleconst 4 0x18 &k
.moduleconst 3 0x0 0x3f800000
.moduleconst 3 0x8 &lut
.constsym 3 one 0x0 4
.constsym 3 lut 0x8 8
.visible lut
.kernel k
--:-:-:Y:1      MOV R0, c[0x4][0x0];
--:-:-:Y:5      EXIT;
"""


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_source_directives_build_the_module(arch):
    cubin = sassas.assemble(SOURCE.replace("sm_80", arch), arch, filename="m.sass").data
    info = read_cubin(cubin)
    module = read_module(info)
    objects = {o.name: o for o in module.globals}
    assert objects["tbl"].offset == 0 and objects["msg"].offset == 16
    assert objects["msg"].initial == b"hello\0" and objects["msg"].bind == STB.GLOBAL
    assert objects["counter"].initial is None and objects["counter"].bind == STB.WEAK
    assert objects["flags"].offset == 0x10 and objects["flags"].initial is None
    assert info.section(".nv.global").size == 0x18
    assert [(r.offset, r.symbol, r.type, r.addend) for r in module.global_relocations] == [
        (0, "msg", RelocType.R_CUDA_G64, 0), (8, "msg", RelocType.R_CUDA_G64, 2)]
    assert [(r.offset, r.symbol, r.type) for r in module.bank_relocations[4]] == [
        (0, "msg", RelocType.R_CUDA_64), (8, "counter", RelocType.R_CUDA_64), (0x18, "k", RelocType.R_CUDA_64)]
    assert module.constant_banks[4][0x10:0x14] == (0x12345678).to_bytes(4, "little")
    assert [(o.name, o.offset, o.size, o.bind) for o in module.bank_symbols[3]] == [
        ("one", 0, 4, STB.LOCAL), ("lut", 8, 8, STB.GLOBAL)]
    assert module.constant_banks[3][:4] == (0x3f800000).to_bytes(4, "little")
    assert (info.section(".rela.nv.constant4") is not None) == (arch == "sm_90")
    # And back: disasm writes what it read, asm builds the same module again.
    again = read_module(read_cubin(sassas.assemble(disassemble(cubin), arch).data))
    assert again == module


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_extern_symbols_in_module_data_and_code(arch):
    """CUTLASS's device printf keeps `vprintf`'s address in bank 4 and calls through a register
    (`CALL.ABS.NOINC R2`): `.extern vprintf` lets `&vprintf` name it. Data and code share one
    undefined global symbol, for the driver to resolve; disasm writes the `.extern` back."""
    source = (".extern vprintf\n.moduleconst 4 0x0 0x1\n.moduleconst 4 0x8 &vprintf\n.kernel k\n"
              "--:-:-:Y:5      CALL.ABS.NOINC `(vprintf);\n--:-:-:Y:5      EXIT;\n")
    cubin = sassas.assemble(source, arch, filename="x.sass").data
    info = read_cubin(cubin)
    module = read_module(info)
    assert module.externs == ["vprintf"]
    assert [(r.offset, r.symbol, r.type) for r in module.bank_relocations[4]] == [(8, "vprintf", RelocType.R_CUDA_64)]
    undefined = [s for s in info.symbols if s.name == "vprintf"]
    assert len(undefined) == 1 and undefined[0].section == 0 and undefined[0].bind == STB.GLOBAL
    assert {r.symbol for r in info.relocations} == {"vprintf"}
    text = disassemble(cubin)
    assert ".extern vprintf" in text and ".moduleconst 4 0x8 &vprintf" in text
    assert read_module(read_cubin(sassas.assemble(text, arch, filename="x.sass").data)) == module


def test_write_cubin_module_image_round_trips():
    from sassas.elf import GlobalObject, KernelImage, Relocation
    code = bytes.fromhex("4d790000000000000000800300ea0f00")
    module = ModuleImage(globals=[GlobalObject("a", 8, 8, 0, initial=bytes(8)), GlobalObject("z", 4, 4, 0)],
                         constant_banks={4: bytes(16)},
                         bank_relocations={4: [Relocation(0, "a"), Relocation(8, "z", addend=4)]},
                         global_relocations=[Relocation(0, "z", RelocType.R_CUDA_G64)])
    for arch in ("sm_75", "sm_90"):
        info = read_cubin(write_cubin(arch, [KernelImage("k", code, [], 8)], module=module))
        assert read_module(info) == module


ERRORS = [
    (".moduleconst 4 0x0 &mgs", "1:20: error: address '&mgs': no global variable, kernel or .extern named 'mgs'; "
                                "did you mean 'msg'?"),
    (".extern k", "1:9: error: '.extern k': 'k' is defined in this file"),
    (".moduleconst 4 0x4 &msg", "1:16: error: .moduleconst offset 0x4 is not 8-byte aligned (an address takes 8 bytes)"),
    (".moduleconst 4 0x2 0x1", "1:16: error: .moduleconst offset 0x2 is not 4-byte aligned"),
    (".moduleconst 0 0x0 0x1", "1:14: error: .moduleconst bank 0: module constant banks are 1..17"),
    (".moduleconst 4 0x0 0x100000000", "1:20: error: '0x100000000' is not a 32-bit word"),
    (".init msg 0x8 0x1", "1:7: error: '.init msg 0x8': 4 bytes at 0x8 run past the 6 bytes of 'msg'"),
    (".init msg 0x4 0x10000", "1:7: error: '.init msg 0x4': 4 bytes at 0x4 run past the 6 bytes of 'msg'"),
    (".init msg 0x0 &msg", "1:7: error: '.init msg 0x0': 8 bytes at 0x0 run past the 6 bytes of 'msg'"),
    (".init mssg 0x0 0x1", "1:7: error: '.init mssg': no global variable named 'mssg'; did you mean 'msg'?"),
    (".init msg 0x2 0x1", "1:11: error: .init offset 0x2 is not 4-byte aligned"),
    (".visible nope", "1:10: error: '.visible nope': no global variable named 'nope'"),
    (".global msg 4", "2:9: error: global 'msg' defined twice (first at line 1)"),
    (".global big 8 8 0x4", "1:17: error: global 'big': offset 0x4 is not a multiple of its alignment 8"),
    (".global big 8 3", "1:15: error: global 'big': alignment 3 is not a power of two"),
    (".global big 0", "1:13: error: global 'big' needs a positive size"),
    (".global a 8 8\n.init a 0x0 0x1\n.global b 4 4 0x4\n.init b 0x0 0x1",
     "3:9: error: global 'b' (0x4+4) overlaps 'a' (0x0+8)"),
    (".global k 4", "1:9: error: global 'k' has the name of a kernel"),
    (".constsym 3 lut 0x0 4", "1:13: error: '.constsym 3 lut': bytes 0x0..0x4 lie past the 0 bytes .moduleconst writes in bank 3"),
    (".constsym 3 msg 0x0 4\n.moduleconst 3 0x0 0x1", "3:9: error: global 'msg' defined twice (first at line 1)"),
    (".moduleconst 4 0x0 &msg+0x10000000000000000", "1:20: error: '&msg+0x10000000000000000': the addend does not fit in 64 bits"),
    (".constbank 2 0x0 &msg", "1:18: error: '&msg': a kernel's own constant bank holds no addresses"),
]


@pytest.mark.parametrize("line,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_malformed_module_directives_are_reported_with_the_place(line, message):
    text = line + "\n.global msg 6 4\n.init msg 0x0 0x1\n.kernel k\n--:-:-:Y:5      EXIT;\n"
    with pytest.raises(SassError) as e:
        sassas.assemble(text, "sm_80", filename="m.sass")
    report = str(e.value)
    assert message in report, report
    assert report.startswith("m.sass:")


def test_unknown_directive_syntax_is_a_syntax_error():
    with pytest.raises(SassError) as e:
        sassas.assemble(".moduleconst 4 0x0 &\n.kernel k\n--:-:-:Y:5      EXIT;\n", "sm_80", filename="m.sass")
    assert str(e.value).startswith("m.sass:1:")


# ------------------------------------------------------------------------------ GPU check

def _gpu():
    from importlib import import_module
    L = import_module("sassas.load")
    ok, why = L.gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    major, minor = L.compute_capability()
    arch = f"sm_{major}{minor}"
    if arch not in ARCHS:
        pytest.skip(f"the GPU is {arch}; sassas targets {', '.join(ARCHS)}")
    return L, arch


def _run(L, cubin: bytes) -> list[int]:
    from sassas.load import DeviceBuffer
    out = DeviceBuffer.from_numpy(np.zeros(8, dtype=np.uint32))
    with L.load(cubin) as m:
        m["k"](1, 1, out)
        return [int(x) for x in out.to_numpy().view(np.uint32)]


@pytest.mark.gpu
def test_gpu_relocated_module_data_reads_the_same():
    L, arch = _gpu()
    original = _ptxas_cubin(arch)
    _text, rebuilt = _round_trip(original)
    info = read_cubin(rebuilt)
    # The same content in the other ELF dialect too.
    other = write_cubin(arch, [k.to_image() for k in info.kernels], module=read_module(info),
                        abi="cuda12" if info.abi == "cuda13" else "cuda13")
    results = {"ptxas": _run(L, original), "sassas": _run(L, rebuilt), "sassas-other-dialect": _run(L, other)}
    print(f"\n[{arch}] {results}")
    for name, got in results.items():
        assert got == EXPECTED, f"{name}: {got} != {EXPECTED}"


@pytest.mark.gpu
def test_gpu_loads_round_tripped_realworld_cubins():
    """Every torchvision/torchaudio cubin of the device's arch, disassembled and assembled,
    loads and has all its kernels (needs the corpus in .cache/realworld; skips otherwise)."""
    L, arch = _gpu()
    import test_realworld_corpus as rw
    try:
        by_arch = rw.cubins("torchvision-audio")
    except rw.CorpusMissing as e:
        pytest.skip(f"torchvision-audio corpus: {e}")
    loaded = 0
    for data in by_arch.get(arch, []):
        names = [k.name for k in read_cubin(data).kernels]
        rebuilt = sassas.assemble(disassemble(data), arch).data
        with L.load(rebuilt) as m:
            assert sorted(m.names) == sorted(names)
            for name in names:
                m.kernel(name)
        loaded += 1
    print(f"\n[{arch}] {loaded} round-tripped torchvision/torchaudio cubins loaded")
    assert loaded > 0


@pytest.mark.gpu
def test_gpu_driver_resolves_an_extern_in_module_data():
    """`.extern vprintf` and `&vprintf` in bank 4: the driver loads the module and fills in
    vprintf's address, which the kernel reads back (as CUTLASS's printf reads it before its
    `CALL.ABS.NOINC R2`)."""
    L, arch = _gpu()
    if arch != "sm_90":
        pytest.skip("the kernel below is written for sm_90")
    source = """
.extern vprintf
.moduleconst 4 0x0 &vprintf
.moduleconst 4 0x8 0x12345678
.kernel k
.param out 8
--:-:-:-:1      ULDC.64 UR4, c[0x0][0x208];
--:-:0:-:1      LDC.64 R2, out[0];
--:-:1:-:1      LDC.64 R4, c[0x4][0x0];
--:-:2:-:1      LDC R6, c[0x4][0x8];
03:-:-:-:4      STG.E.64 desc[UR4][R2.64], R4;
04:-:-:-:1      STG.E desc[UR4][R2.64+0x8], R6;
--:-:-:Y:5      EXIT;
"""
    words = _run(L, sassas.assemble(source, arch, filename="extern.sass").data)
    address = words[0] | words[1] << 32
    print(f"\n[{arch}] vprintf at 0x{address:x}")
    assert address != 0 and words[2] == 0x12345678
