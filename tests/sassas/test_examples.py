"""The examples: `sassas asm` from the command line, and nvdisasm (the oracle) shows exactly
the instructions and control codes written in the source. GPU runs at the end (skipped
without a GPU, with the reason)."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import sassas
from sassas.arch import ARCHS, constant_slot, get_arch
from sassas.isa import get_isa
from sassas.learn import oracle
from sassas.parse import parse_instruction
from sassas.resolve import resolve_kernel
from sassas.schedule import schedule_kernel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = ["saxpy.sass", "saxpy_blackwell.sass", "smem_loop.sass", "smem_loop_auto.sass"]


def claimed_archs(name: str) -> list[str]:
    """The archs an example says it is for: its `# archs: sm_80 sm_90` header line."""
    with open(os.path.join(ROOT, "examples", name)) as f:
        for line in f:
            m = re.match(r"#\s*archs:\s*(.*)", line)
            if m:
                return m.group(1).split()
    raise AssertionError(f"examples/{name} does not say which archs it is for (# archs: ...)")


def _nvdisasm(arch):
    try:
        return str(oracle.find_tool("nvdisasm", arch))
    except oracle.OracleMissing as e:
        pytest.skip(f"nvdisasm for {arch} not installed (test extra): {e}")


def _listing_instructions(text: str):
    """(address, instruction text, control bits) from `nvdisasm -hex` output."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = re.search(r"/\*([0-9a-f]{4})\*/\s+(.*?)\s*;\s*/\* (0x[0-9a-f]{16}) \*/", line)
        if m:
            high = int(re.search(r"0x[0-9a-f]{16}", lines[i + 1]).group(), 16)
            out.append((int(m.group(1), 16), m.group(2), high >> 41))
    return out


def test_every_example_claims_its_archs():
    for name in EXAMPLES:
        archs = claimed_archs(name)
        assert archs and all(a in ARCHS for a in archs), (name, archs)


@pytest.mark.oracle
@pytest.mark.parametrize("name,arch", [(n, a) for n in EXAMPLES for a in claimed_archs(n)])
def test_cli_assembles_and_nvdisasm_shows_the_source(name, arch, tmp_path):
    """Each example, for every arch it claims: nvdisasm shows the instructions and control
    codes written, and the memory descriptor read from that arch's slot."""
    nvdisasm = _nvdisasm(arch)
    out = tmp_path / (name[:-5] + ".cubin")
    src = os.path.join(ROOT, "examples", name)
    r = subprocess.run([sys.executable, "-m", "sassas", "asm", src, "-o", str(out), "--arch", arch],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    listing = subprocess.run([nvdisasm, "-hex", str(out)], capture_output=True, text=True, check=True)
    assert "warning" not in listing.stderr.lower() and "error" not in listing.stderr.lower()
    decoded = _listing_instructions(listing.stdout)

    with open(src) as f:
        program = sassas.parse(f.read(), arch, src)
    kernel = program.kernels[0]
    resolve_kernel(kernel, get_arch(arch))
    if any(inst.control is None for inst in kernel.instructions):
        schedule_kernel(kernel, get_arch(arch))
    isa = get_isa(arch)
    written = kernel.instructions
    assert len(decoded) >= len(written)
    descriptor = f"c[0x0][{constant_slot('memoryDescriptor', get_arch(arch)):#x}]"
    # (ULDC.64 to sm_90, LDCU.64 on Blackwell, which has no ULDC)
    descriptor_reads = [text for _a, text, _c in decoded if text.startswith(("ULDC.64", "LDCU.64"))]
    assert descriptor_reads and all(t.endswith(descriptor) for t in descriptor_reads), descriptor_reads
    for inst, (address, text, control) in zip(written, decoded):
        assert address == inst.address
        # Same instruction: nvdisasm's text parses to what the source said (labels resolved).
        theirs = parse_instruction(text + " ;")
        ours_text = isa.format(inst)
        assert (theirs.opcode, theirs.modifiers) == (inst.opcode, inst.modifiers), (text, ours_text)
        # (sm_80..sm_89 print no `desc[UR4]`: the descriptor register is a hidden field there)
        hidden = inst.opcode in isa.descriptor_opcodes and "desc[" not in text
        if not any(op.kind == "L" for op in inst.operands) and not hidden:
            assert [(o.kind, o.values, o.flags - {"reuse"}) for o in theirs.operands] == \
                   [(o.kind, o.values, o.flags - {"reuse"}) for o in inst.operands], (text, ours_text)
        # Same control code, field by field.
        assert inst.control.to_text() == type(inst.control).from_bits(control).to_text(), text


def test_bad_input_exits_1_with_location(tmp_path):
    bad = tmp_path / "bad.sass"
    bad.write_text("--:-:-:Y:4      FOO R1, R2;\n--:-:-:Y:4      MOV R1, R2\n--:-:-:Y:4      EXIT;\n")
    r = subprocess.run([sys.executable, "-m", "sassas", "asm", str(bad), "-o", str(tmp_path / "x.cubin"),
                        "--arch", "sm_90"], capture_output=True, text=True)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert re.search(r"bad\.sass:\d+:\d+: error: ", r.stderr), r.stderr
    assert not (tmp_path / "x.cubin").exists()


# ---- on the GPU ---------------------------------------------------------------------------

def _gpu():
    from sassas.load import gpu_available
    ok, why = gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")


@pytest.mark.gpu
def test_examples_run_and_match_numpy():
    _gpu()
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import saxpy
    import smem_loop
    assert saxpy.run(n=100_003) < 1e-6
    err, _ = smem_loop.run(blocks=33, iters=17)
    assert err < 1e-6


@pytest.mark.gpu
@pytest.mark.parametrize("framework", ["cupy", "torch"])
def test_device_arrays_from_frameworks(framework):
    """Arrays with __cuda_array_interface__ (CuPy) or DLPack (torch) go straight in."""
    _gpu()
    lib = pytest.importorskip(framework)
    cubin = sassas.assemble_file(os.path.join(ROOT, "examples", "saxpy.sass"), arch="sm_90")
    kernel = sassas.load(cubin)["saxpy"]
    n = 4097
    rng = np.random.default_rng()
    x_host = rng.standard_normal(n).astype(np.float32)
    y_host = rng.standard_normal(n).astype(np.float32)
    if framework == "cupy":
        x, y = lib.asarray(x_host), lib.asarray(y_host)
    else:
        x, y = lib.from_numpy(x_host).cuda(), lib.from_numpy(y_host).cuda()
    kernel((n + 255) // 256, 256, 1.5, x, y, n)
    got = y.get() if framework == "cupy" else y.cpu().numpy()
    want = 1.5 * x_host.astype(np.float64) + y_host
    assert np.max(np.abs(got - want)) < 1e-5
