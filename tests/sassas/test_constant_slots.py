"""The arch-neutral names of constant-bank slots (sassas.arch.CONSTANT_SLOTS) against ptxas
12.9 (the oracle): small PTX kernels per arch, whose SASS reads each slot the way hand-written
SASS would; the offsets ptxas reads must be the table's, and where the table has no slot for
an arch, ptxas reads none there either (and the name is an error with the reason)."""
import re
import subprocess
import tempfile

import pytest

import sassas
from sassas.arch import ARCHS, CONSTANT_SLOTS
from sassas.errors import SassError
from sassas.learn import oracle
from sassas.learn.corpus import ptx

_STORE = (".visible .entry k(.param .u64 p){{ .reg .b64 %a<3>; .reg .b32 %v; {decl} ld.param.u64 %a0,[p]; "
          "cvta.to.global.u64 %a0,%a0; {body} ret;}}")
# slot name -> (PTX that needs it, the SASS of ptxas that reads it, words read: the windows
# are 64-bit addresses read a word at a time, the descriptor a pair at once)
PROBES = {
    "memoryDescriptor": (_STORE.format(decl="", body="ld.global.u32 %v,[%a0]; add.u32 %v,%v,1; st.global.u32 [%a0],%v;"),
                         r"(?:ULDC|LDCU)\.64 UR\d+, c\[0x0\]\[(0x[0-9a-f]+)\]", 1),
    "stackPointer": (_STORE.format(decl="", body="st.global.u32 [%a0],1;"),
                     r"(?:MOV|IMAD\.MOV\.U32|LDC) R1, (?:RZ, RZ, )?c\[0x0\]\[(0x[0-9a-f]+)\]", 1),
    "sharedWindow": (_STORE.format(decl=".shared .align 4 .b32 s[64];",
                                   body="mov.u64 %a1, s; cvta.shared.u64 %a2,%a1; st.global.u64 [%a0],%a2;"),
                     r"(?:MOV|IMAD\.MOV\.U32) R(?!1\b)\d+, (?:RZ, RZ, )?c\[0x0\]\[(0x[0-9a-f]+)\]", 2),
    "localWindow": (_STORE.format(decl=".local .align 4 .b32 l[64];",
                                  body="mov.u64 %a1, l; cvta.local.u64 %a2,%a1; st.global.u64 [%a0],%a2;"),
                    r"(?:IADD3 R\d+, P0, R1, |IMAD\.X R\d+, RZ, RZ, |ULDC UR\d+, )c\[0x0\]\[(0x[0-9a-f]+)\]", 2),
}


def _sass(ptx_body: str, arch: str) -> str:
    cubin = oracle.compile_ptx(ptx.header(arch) + "\n" + ptx_body, arch)
    assert cubin is not None, "ptxas refused the probe"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([str(oracle.find_tool("nvdisasm", arch)), f.name], capture_output=True,
                              text=True, check=True).stdout


@pytest.mark.oracle
@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("name", list(PROBES))
def test_slot_offsets_are_what_ptxas_reads(name, arch):
    if not oracle.have_tools(arch):
        pytest.skip(f"ptxas/nvdisasm for {arch} not installed")
    body, pattern, words = PROBES[name]
    # (the driver's slots lie below the parameters: sm_75's `ULDC.64 UR4, c[0x0][0x160]` is one)
    read = sorted({int(m, 16) for m in re.findall(pattern, _sass(body, arch))} - _parameter_words(arch))
    offset = CONSTANT_SLOTS[name].offsets.get(arch)
    assert read == ([offset + 4 * i for i in range(words)] if offset is not None else []), (name, arch, read)


def _parameter_words(arch):
    base = ARCHS[arch].param_base
    return set(range(base, base + 8, 4))


@pytest.mark.parametrize("name", list(CONSTANT_SLOTS))
@pytest.mark.parametrize("arch", list(ARCHS))
def test_names_assemble_or_say_why_not(name, arch):
    src = f"--:-:-:Y:4 MOV R2, {name};\n--:-:-:Y:5 EXIT;\n"
    offset = CONSTANT_SLOTS[name].offsets.get(arch)
    if offset is None:
        with pytest.raises(SassError, match=f"'{name}' .* does not exist on {arch}: .*; it exists on sm_"):
            sassas.parse(src, arch, "k.sass")
        return
    inst = sassas.parse(src, arch, "k.sass").kernels[0].instructions[0]
    assert (inst.operands[1].kind, inst.operands[1].values) == ("C[I][I]", (0, offset))


LAUNCH_DIMENSIONS = {"blockDim": "ntid", "gridDim": "nctaid"}


@pytest.mark.oracle
@pytest.mark.parametrize("arch", list(ARCHS))
def test_launch_dimensions_are_what_ptxas_reads(arch):
    """`blockDim.x` .. `gridDim.z` in a source, through the whole assembler (front end and
    resolver), read the constants ptxas reads for %ntid / %nctaid (Blackwell: gridDim.x is
    16 bytes after blockDim.x, at c[0x0][0x370], not 12)."""
    if not oracle.have_tools(arch):
        pytest.skip(f"ptxas/nvdisasm for {arch} not installed")
    try:
        from sassas.isa import get_isa
        get_isa(arch)
    except SassError as e:
        pytest.skip(str(e))
    for dim, register in LAUNCH_DIMENSIONS.items():
        for axis in "xyz":
            body = f"mov.u32 %v, %{register}.{axis}; st.global.u32 [%a0],%v;"
            sass = _sass(_STORE.format(decl="", body=body), arch).replace("][RZ]", "][0x0]")
            read = {int(m, 16) for m in re.findall(r"(?:LDC|ULDC|MOV|IMAD\.MOV\.U32) U?R\d+, (?:RZ, RZ, )?"
                                                      r"c\[0x0\]\[(0x[0-9a-f]+)\]", sass)}
            read -= _parameter_words(arch) | {CONSTANT_SLOTS["stackPointer"].offsets.get(arch)}
            cubin = sassas.assemble(f"--:-:0:-:2 LDC R2, {dim}.{axis};\n--:-:-:Y:5 EXIT;\n", arch, "k.sass")
            ours = oracle.disassemble_code(oracle.text_sections(cubin.data)[0][1], arch)[0].text
            assert read == {int(re.search(r"c\[0x0\]\[(\w+)\]", ours.replace("RZ", "0x0")).group(1), 16)}, \
                (arch, dim, axis, read, ours)
