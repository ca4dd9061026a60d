"""The hidden memory descriptor of sm_80..sm_89 (CPU only; words pinned from ptxas 12.9).

nvdisasm prints `LDG.E R2, [R2.64]` for a word whose bits 32..37 name the uniform pair that
`ULDC.64 UR6, c[0x0][0x118]` loaded; STG/RED/ATOMG keep it in bits 64..69. The description
holds that field (learned by sassas.learn.passes.learn_descriptors); the resolve stage fills it
from the descriptor load (the latest one in the same basic block, else the kernel's first:
resolve.descriptor_registers); `sassas disasm` keeps any other register with `.raw`.
"""
import pytest

import sassas
from sassas.disasm import disassemble
from sassas.elf import read_cubin
from sassas.isa import get_isa
from sassas.isa.forms import CONTROL_MASK
from sassas.parse import parse_instruction

ARCHS = ["sm_80", "sm_86", "sm_89"]

# ptxas 12.9 words (control bits cleared) of the descriptor corpus kernel desc_red_4
# (sassas/learn/corpus/ptx.py): the descriptor lands in UR8; the same on sm_80, sm_86, sm_89.
UR8_KERNEL = [
    (0x0000000000000a000000460000087ab9, "ULDC.64 UR8, c[0x0][0x118]"),
    (0x00000000078e000700005a0004027625, "IMAD.WIDE.U32 R2, R4, R7, c[0x0][0x168]"),
    (0x000000000bf020700000000500007c0c, "ISETP.EQ.U32.AND P0, PT, R0, UR5, PT"),
    (0x000000000c10e188000000050200098e, "@P0 RED.E.ADD.STRONG.GPU [R2.64], R5"),
    (0x00000000078e00070000580004027625, "IMAD.WIDE.U32 R2, R4, R7, c[0x0][0x160]"),
    (0x000000000c1019080000000502007986, "STG.E [R2.64], R5"),
    (0x0000000003800000000000000000794d, "EXIT"),
]
# desc_ld_2: UR6, an LDG (bits 32..37) and an STG.
UR6_KERNEL = [
    (0x0000000000000a000000460000067ab9, "ULDC.64 UR6, c[0x0][0x118]"),
    (0x000000000c1e19000000000602027981, "LDG.E R2, [R2.64]"),
    (0x000000000c1019060000000502007986, "STG.E [R2.64], R5"),
    (0x0000000003800000000000000000794d, "EXIT"),
]
# desc_ld_0: no other uniform value live, UR4 (the description's default).
LDG_UR4 = 0x000000000c1e19000000000402037981
# desc_ld_4: the same LDG with the descriptor in UR8.
ULDC_UR8 = 0x0000000000000a000000460000087ab9
LDG_UR8 = 0x000000000c1e19000000000802027981


def _code(arch: str, lines: list[str]) -> list[int]:
    source = "".join(f"--:-:-:Y:2  {text};\n" for text in lines)
    code = read_cubin(sassas.assemble(source, arch, filename="k.sass").data).kernels[0].code
    return [int.from_bytes(code[i:i + 16], "little") & ~CONTROL_MASK for i in range(0, len(code), 16)]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kernel", [UR8_KERNEL, UR6_KERNEL], ids=["UR8", "UR6"])
def test_listing_text_gets_the_register_of_the_descriptor_load(arch, kernel):
    words = [w for w, _text in kernel]
    assert _code(arch, [text for _w, text in kernel]) == words


@pytest.mark.parametrize("arch", ARCHS)
def test_without_a_descriptor_load_the_default_is_ptxas_usual_ur4(arch):
    assert _code(arch, ["LDG.E R3, [R2.64]", "EXIT"])[0] == LDG_UR4


@pytest.mark.parametrize("arch", ARCHS)
def test_a_reload_in_the_same_block_wins_then_the_first_load_again(arch):
    """ptxas sometimes loads the descriptor again into another pair right before one use deep
    in a kernel (bitsandbytes' deform_conv kernels); after the next label it uses the first."""
    lines = ["ULDC.64 UR6, c[0x0][0x118]", "LDG.E R2, [R2.64]", "@P0 BRA L1", "L1:",
             "ULDC.64 UR8, c[0x0][0x118]", "LDG.E R2, [R2.64]", "@P0 BRA L2", "L2:", "LDG.E R2, [R2.64]", "EXIT"]
    source = "".join(t + "\n" if t.endswith(":") else f"--:-:-:Y:2  {t};\n" for t in lines)
    cubin = sassas.assemble(source, arch, filename="k.sass").data
    code = read_cubin(cubin).kernels[0].code
    words = [int.from_bytes(code[i:i + 16], "little") & ~CONTROL_MASK for i in range(0, len(code), 16)]
    ldg_ur6 = UR6_KERNEL[1][0]
    assert [words[i] for i in (0, 1, 3, 4, 6)] == [UR6_KERNEL[0][0], ldg_ur6, ULDC_UR8, LDG_UR8, ldg_ur6]
    # disasm's labels are the branch targets, so it reads the blocks alike: no .raw needed.
    text = disassemble(cubin)
    assert ".raw" not in text
    assert read_cubin(sassas.assemble(text, arch, filename="k.sass").data).kernels[0].code == code


@pytest.mark.parametrize("arch", ARCHS)
def test_branch_targets_start_blocks_without_labels(arch):
    """`cuobjdump -sass` prints no labels, only `BRA 0x60`: a branch target starts a block as a
    label there would (torchvision's sm_80 atomics read UR4 after such a target, not UR8)."""
    lines = ["ULDC.64 UR6, c[0x0][0x118]", "LDG.E R2, [R2.64]", "@P0 BRA 0x30",
             "ULDC.64 UR8, c[0x0][0x118]", "LDG.E R2, [R2.64]", "@P0 BRA 0x60", "LDG.E R2, [R2.64]", "EXIT"]
    words = _code(arch, lines)
    ldg_ur6 = UR6_KERNEL[1][0]
    assert [words[i] for i in (0, 1, 3, 4, 6)] == [UR6_KERNEL[0][0], ldg_ur6, ULDC_UR8, LDG_UR8, ldg_ur6]


@pytest.mark.parametrize("arch", ARCHS)
def test_decoder_reads_the_hidden_register_and_prints_nvdisasm_text(arch):
    isa = get_isa(arch)
    inst = isa.decode(UR8_KERNEL[5][0])
    assert inst.descriptor == 8 and isa.format(inst) == "STG.E [R2.64], R5"
    assert isa.decode(UR6_KERNEL[1][0]).descriptor == 6


@pytest.mark.parametrize("arch", ARCHS)
def test_explicit_desc_is_the_printed_descriptor_form(arch):
    """`desc[UR6][...]` is what nvdisasm prints when bit 101 is set (checked with nvdisasm
    13.5 on sm_80/86/89): a different word from the hidden-descriptor one, kept apart."""
    isa = get_isa(arch)
    hidden = isa.encode(parse_instruction("LDG.E.CONSTANT R3, [R2.64]")) & ~CONTROL_MASK
    explicit = isa.encode(parse_instruction("LDG.E.CONSTANT R3, desc[UR6][R2.64]")) & ~CONTROL_MASK
    assert hidden == 0x000000000c1e99000000000402037981
    assert explicit == 0x000000200c1e99000000000602037981
    assert isa.format(isa.decode(explicit)) == "LDG.E.CONSTANT R3, desc[UR6][R2.64]"


@pytest.mark.parametrize("arch", ARCHS)
def test_disasm_round_trip_needs_raw_only_where_the_rule_misses(arch):
    lines = [text for _w, text in UR6_KERNEL]
    cubin = sassas.assemble("".join(f"--:-:-:Y:2  {t};\n" for t in lines), arch, filename="k.sass").data
    text = disassemble(cubin)
    assert ".raw" not in text
    # The STG names UR10 although the kernel loaded the descriptor into UR6: kept by .raw.
    code = bytearray(read_cubin(cubin).kernels[0].code)
    stg = int.from_bytes(code[32:48], "little")
    stg = stg & ~(0x3F << 64) | 10 << 64
    code[32:48] = stg.to_bytes(16, "little")
    patched = cubin.replace(bytes(read_cubin(cubin).kernels[0].code), bytes(code))
    text = disassemble(patched)
    assert text.count(".raw") == 1
    rebuilt = read_cubin(sassas.assemble(text, arch, filename="k.sass").data).kernels[0].code
    assert rebuilt == bytes(code)
