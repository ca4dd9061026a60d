"""Winograd F(4x4,3x3) fused (kernels_sass.winograd.f4fused), on the CPU: the generated SASS in
the simulator against float64 on odd shapes (sizes not multiples of the tiles), sassas's hazard
checker and NVIDIA's disassembler, the float32 model's error at ResNet channel counts; on a GPU
(marked gpu), conv2d(algo="f4fused") against float64.

Random data come from a fresh seed each run, shown in the summary; SASSAS_FUZZ_SEED=N replays it."""
from __future__ import annotations

import os
import random
import re

import numpy as np
import pytest

from kernels_sass.winograd import cost, cubins, f4fused, f4fused_layout, f4fused_regs, pieces
from kernels_sass.winograd import reference as ref
from kernels_sass.winograd.check import f4fused_simulated_error
from kernels_sass.winograd.plan import Shape, Unsupported

SEED = int(os.environ["SASSAS_FUZZ_SEED"])    # drawn once a run and reported by tests/conftest.py


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng([SEED, sum(map(ord, name))])


# N, C, H, W, K: H, W not multiples of 4, C of 8, K of 32, tiles of 32; several blocks in x and
# y; a 1x1 image (one tile, 8 of its 9 window rows and columns padding); C = 1 (with 9 filters:
# workloads.ODD says why not one)
SHAPES = [Shape(2, 9, 7, 6, 5), Shape(3, 17, 9, 11, 40), Shape(7, 1, 1, 1, 9), Shape(5, 24, 3, 2, 70),
          Shape(1, 16, 13, 10, 33), Shape(2, 10, 5, 12, 36)]


@pytest.mark.parametrize("layout", ["NCHW", "CHWN"])
@pytest.mark.parametrize("s", SHAPES, ids=str)
def test_simulated_kernel_matches_float64(s, layout):
    err, m = f4fused_simulated_error(s, _rng(str(s) + layout), layout=layout)
    print(f"{s} {layout}: relative error {err:.2e} (seed {SEED})")
    assert err <= 1e-5
    assert m.race_log == [] and m.undefined_log == []


@pytest.mark.parametrize("s,parts", [(Shape(3, 17, 9, 11, 40), 2), (Shape(2, 9, 7, 6, 5), 3), (Shape(1, 40, 5, 5, 33), 4)],
                         ids=str)
def test_split_channels_add_up_in_the_simulator(s, parts):
    """Split-C: grid z = parts, each adds its channels' sums into y (REDG) from zero."""
    err, m = f4fused_simulated_error(s, _rng(f"{s}{parts}"), parts=parts, layout=("NCHW", "CHWN")[parts % 2])
    print(f"{s} in {parts} parts: relative error {err:.2e} (seed {SEED})")
    assert err <= 1e-5
    assert m.race_log == [] and m.undefined_log == []


@pytest.mark.parametrize("s,parts,layout,sms", [(Shape(4, 16, 24, 24, 40), 1, "NCHW", 3), (Shape(3, 24, 20, 20, 33), 1, "CHWN", 3),
                                                 (Shape(2, 8, 30, 30, 70), 1, "NCHW", 5), (Shape(3, 40, 16, 16, 40), 2, "NCHW", 3),
                                                 (Shape(2, 17, 17, 19, 40), 1, "NCHW", 1)], ids=str)
def test_persistent_blocks_take_the_tiles_in_turns(s, parts, layout, sms):
    """Persistent blocks on a GPU of `sms` SMs, each taking several block tiles (6 to 12 of them,
    channel loops of even and odd length, the parts of split-C among them; one SM: every tile in
    one block): the next tile's first chunk is written while this tile's M is read."""
    f = f4fused.fused(s, parts, layout)
    assert f.persistent and f.launch_grid(sms) == (sms, 1, 1) and f.blocks >= 2 * sms
    err, m = f4fused_simulated_error(s, _rng(f"{s}{sms}"), parts=parts, layout=layout, sms=sms)
    print(f"{s} {layout} in {parts} parts on {sms} SMs: relative error {err:.2e} (seed {SEED})")
    assert err <= 1e-5
    assert m.race_log == [] and m.undefined_log == []


def test_block_per_tile_kernel_is_the_switch_off():
    """PERSISTENT off: a block a tile, the grid of the tiles, no branch back from the epilogue."""
    from kernels_sass.winograd.f4fused_placement import constants
    s = Shape(4, 16, 24, 24, 40)
    with constants({"PERSISTENT": False}):
        f = f4fused.fused(s)
        assert not f.persistent and f.launch_grid(3) == f.grid() == (5, 2, 1)
        assert "LAST:" not in f4fused.generate(s)
        err, m = f4fused_simulated_error(s, _rng("per tile"))
    assert err <= 1e-5
    assert m.race_log == [] and m.undefined_log == []


def test_split_model_picks_parts_for_grids_under_a_wave():
    """The cost model's split on the H100 and the H200: Conv5/N32 (64 blocks) and N96 (192) in 2
    in either layout; Conv3/N32 (196 blocks) whole in NCHW, where the adds of a split are 16
    bytes apart (measured 111 us in 2 parts, the model's 78 whole), the others whole."""
    for gpu in cost.KNOWN_GPUS.values():
        for layout in ("NCHW", "CHWN"):
            picks = {(c, n): cost.f4fused_parts(Shape(n, c, hw, hw, k), layout, gpu)
                     for c, hw, k in ((64, 56, 64), (128, 28, 128), (256, 14, 256), (512, 7, 512)) for n in (32, 64, 96, 128)}
            split = {key for key, p in picks.items() if p > 1}
            assert split - {(128, 32)} == {(512, 32), (512, 96)}, (gpu, layout)
            assert picks[(512, 32)] == 2
            if layout == "NCHW":
                assert picks[(128, 32)] == 1


@pytest.mark.parametrize("s", [Shape(1, 9, 2, 3, 300), Shape(1, 3, 2, 2, 500)], ids=str)
def test_copies_from_several_source_registers(s):
    """U rows of 320 and 512 filters: the 8 copies' sources 1280 and 2048 bytes apart, beyond one
    register's 12-bit offsets, from 3 and 4 registers."""
    assert f4fused_layout.Fused(s).copy_sources == (3 if s.K == 300 else 4)
    err, m = f4fused_simulated_error(s, _rng(str(s)))
    print(f"{s}: relative error {err:.2e} (seed {SEED})")
    assert err <= 1e-5
    assert m.race_log == [] and m.undefined_log == []


def test_random_shape_in_the_simulator():
    """One shape drawn from the seed (each dimension 1..the size that keeps the run short)."""
    r = random.Random(f"{SEED}-shape")
    s = Shape(r.randint(1, 4), r.randint(1, 20), r.randint(1, 12), r.randint(1, 12), r.randint(1, 70))
    err, m = f4fused_simulated_error(s, _rng("random"), layout=r.choice(["NCHW", "CHWN"]))
    print(f"{s}: relative error {err:.2e} (seed {SEED})")
    assert err <= 1e-5
    assert m.race_log == [] and m.undefined_log == []


@pytest.mark.parametrize("s", [Shape(3, 17, 9, 11, 40), Shape(128, 512, 7, 7, 512), Shape(32, 64, 56, 56, 64)],
                         ids=str)
def test_kernel_assembles_without_hazards(s):
    import sassas
    from sassas.elf import read_cubin
    text = f4fused.generate(s)
    cubin = sassas.assemble(text, "sm_90", filename="f4fused.sass")
    assert cubins.hazards(cubin.program) == []
    info = read_cubin(cubin.data).kernel(f4fused.kernel_name(s))
    assert info.registers <= 255                     # x 256 threads <= 64K, R252 the highest
    assert f4fused.fused(s).smem_bytes <= 227 << 10
    assert [p.size for p in info.params] == [8, 8, 8]
    # the loop: 8 channels of 128 + 16 FFMA (6 + 2 LDS.128 each), 9 copies, 36 loads (18 or 24
    # where a load reads 4 or 2 columns), 36 stores
    loop = text[text.index("LOOP:"):text.index("BRA LOOP")]
    assert len(re.findall(r"\bFFMA R\d+, R\d+(\.reuse)?, R\d+(\.reuse)?, R\d+;", loop)) == 1152
    assert len(re.findall(r"\bLDS\.128\b", loop)) == 64
    assert len(re.findall(r"\bLDGSTS\b", loop)) == 9
    assert len(re.findall(r"\bLDG\.E\b", loop)) == {1: 36, 2: 24, 4: 18}[f4fused.Generator(s).wide]
    assert len(re.findall(r"\bSTS\b", loop)) == 36
    assert max(int(r) for r in re.findall(r"\bR(\d+)\b", text)) <= f4fused_regs.TOP


def test_input_transform_reads_both_register_banks():
    """The window's registers (f4fused_regs.WIN) put the two register sources of all but 12 of the
    transform's 144 FADD/FFMA in different banks (one per six-point transform: r1 and r5)."""
    ops = f4fused.Generator(Shape(3, 17, 9, 11, 40)).transform_and_store()
    pairs = [[int(r) for r in re.findall(r"R(\d+)", t.split(",", 1)[1])] for t in ops if t.startswith(("FADD", "FFMA"))]
    assert len(pairs) == 144
    assert sum(1 for r in pairs if r[0] % 2 == r[1] % 2) == 12
    assert sorted(r for row in f4fused_regs.WIN for r in row) == sorted(set(r for row in f4fused_regs.WIN for r in row))


def test_wide_window_loads_where_rows_allow():
    """NCHW rows of W % 4 == 0 floats: a window row by LDG + LDG.128 + LDG (W % 2 == 0: two
    LDG.64 in the middle), 70 one-bank transform ops (WIN_WIDE); odd W, CHWN, or x not 16-byte
    aligned (the "_unaligned" kernel): 36 LDG.E."""
    def loads(s, layout="NCHW", aligned=True):
        text = f4fused.generate(s, layout=layout, aligned=aligned)
        return re.findall(r"LDG\.E(?:\.(\d+))? ", text.split("LOOP:")[1].split("@P6 BRA LOOP")[0])
    assert sorted(loads(Shape(2, 9, 5, 12, 36))) == [""] * 12 + ["128"] * 6
    assert sorted(loads(Shape(2, 9, 5, 10, 36))) == [""] * 12 + ["64"] * 12
    for args in ((Shape(2, 9, 5, 11, 36),), (Shape(2, 9, 5, 12, 36), "CHWN"), (Shape(2, 9, 5, 12, 36), "NCHW", False)):
        assert loads(*args) == [""] * 36
    assert f4fused.kernel_name(Shape(2, 9, 5, 12, 36), aligned=False).endswith("_unaligned")
    # y: a tile row by one STG.128 where W % 4 == 0, two STG.64 where W % 2 == 0 (aligned, one part)
    for args, kw, want in (((Shape(2, 9, 5, 12, 36),), {}, ["128"] * 16), ((Shape(2, 9, 5, 12, 36),), {"parts": 2}, [""] * 64),
                           ((Shape(2, 9, 5, 10, 36),), {}, ["64"] * 32), ((Shape(2, 9, 5, 12, 36),), {"aligned": False}, [""] * 64),
                           ((Shape(2, 9, 5, 11, 36),), {}, [""] * 64)):
        epilogue = f4fused.generate(*args, **kw).split("LAST:")[1]     # (the last tile's)
        assert re.findall(r"\b(?:STG|REDG)\.E(?:\.(\d+))?\b", epilogue) == want
    ops = f4fused.Generator(Shape(2, 9, 5, 12, 36)).transform_and_store()
    pairs = [[int(r) for r in re.findall(r"R(\d+)", t.split(",", 1)[1])] for t in ops if t.startswith(("FADD", "FFMA"))]
    assert sum(1 for r in pairs if r[0] % 2 == r[1] % 2) == 70
    assert all(row[1] % 4 == 0 and row[1:5] == list(range(row[1], row[1] + 4)) for row in f4fused_regs.WIN_WIDE)


def test_nvdisasm_reads_the_kernel_as_written():
    from sassas.learn import oracle
    why = oracle.missing_tools("sm_90", ("nvdisasm",))
    if why:
        pytest.skip(why)
    # STG, REDG; LDG.E.128, LDG.E.64; the copies' negative offsets (K 128 and 512)
    for s, parts, layout in ((Shape(3, 17, 9, 11, 40), 1, "NCHW"), (Shape(3, 17, 9, 11, 40), 2, "CHWN"),
                             (Shape(2, 9, 5, 12, 128), 1, "NCHW"), (Shape(2, 9, 5, 10, 500), 1, "NCHW")):
        assert cubins.disasm_mismatches(f4fused.generate(s, parts=parts, layout=layout),
                                        f4fused.build(s, parts, layout, cache=False)) == []


def test_sassas_check_cli_reports_no_hazard(tmp_path):
    """`python -m sassas check` on the generated source, as a user runs it."""
    import subprocess
    import sys
    src = tmp_path / "f4fused.sass"
    src.write_text(f4fused.generate(Shape(2, 9, 7, 6, 5)))
    r = subprocess.run([sys.executable, "-m", "sassas", "check", str(src), "--arch", "sm_90"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_transforms_are_the_f43_matrices():
    """pieces.f43_bt_ops and f43_at_ops (the in-place FADD/FFMA lists) compute B^T d and A^T m."""
    rng = _rng("transforms")
    for ops_of, mat, n_out in ((pieces.f43_bt_ops, ref.BT4, 6), (pieces.f43_at_ops, ref.AT4, 4)):
        regs, spares = list(range(6)), list(range(6, 6 + (4 if n_out == 6 else 2)))
        ops, where = ops_of(regs, spares)
        d = rng.standard_normal(6)
        r = dict(enumerate(d))

        def value(tok):
            if tok.lstrip("-").startswith("R"):
                return -r[int(tok[2:])] if tok.startswith("-") else r[int(tok[1:])]
            return float(tok)
        for text in ops:
            op, args = text.split(" ", 1)
            dst, *src = [t.strip() for t in args.split(",")]
            v = [value(t) for t in src]
            r[int(dst[1:])] = v[0] + v[1] if op == "FADD" else v[0] * v[1] + v[2]
        assert np.allclose([r[w] for w in where], mat @ d, rtol=0, atol=1e-12)


def test_float32_error_at_resnet_channel_counts():
    """The kernel's arithmetic in float32 (reference.f43_conv2d_fp32) against float64 with
    ResNet's channel counts: within the 1e-5 bound with the points (0, +-1, +-2, inf)."""
    rng = _rng("fp32")
    for c, hw in ((64, 14), (512, 7)):
        x, w = rng.standard_normal((2, c, hw, hw)), rng.standard_normal((8, c, 3, 3))
        want = ref.direct_conv2d(x, w)
        err = np.linalg.norm(ref.f43_conv2d_fp32(x, w) - want) / np.linalg.norm(want)
        print(f"C={c} {hw}x{hw}: float32 model {err:.2e} (seed {SEED})")
        assert err <= 1e-5


def test_toom_cook_matrices_give_the_kernels_f43():
    g, bt, at = ref.f43_matrices([0, 1, -1, 2, -2])
    assert np.allclose(bt, ref.BT4) and np.allclose(at, ref.AT4) and np.allclose(g, ref.G4)
    rng = _rng("toom")
    g, bt, at = ref.f43_matrices([0, 1, -1, 0.5, -2])
    d, f = rng.standard_normal(6), rng.standard_normal(3)
    assert np.allclose(at @ ((g @ f) * (bt @ d)), [d[i:i + 3] @ f for i in range(4)], rtol=0, atol=1e-12)


def test_unsupported_shapes_are_refused():
    with pytest.raises(Unsupported):
        f4fused_layout.check(Shape(0, 3, 5, 5, 4))
    with pytest.raises(Unsupported):
        f4fused_layout.check(Shape(4096, 512, 56, 56, 64))          # x past 2 GiB
    with pytest.raises(Unsupported, match="at most 512 filters"):
        f4fused_layout.check(Shape(1, 8, 4, 4, 513))                # the copies' sources: 8 registers
    assert f4fused_layout.Fused(Shape(128, 512, 7, 7, 512)).grid() == (16, 16, 1)
    assert f4fused_layout.Fused(Shape(32, 20, 7, 7, 512), 3).Cp == 24 and f4fused_layout.Fused(Shape(32, 20, 7, 7, 512), 3).grid()[2] == 3


# ---- on the GPU -----------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("parts", [0, 2])
@pytest.mark.parametrize("layout", ["NCHW", "CHWN"])
@pytest.mark.parametrize("shape", [Shape(33, 20, 9, 11, 70), Shape(64, 512, 7, 7, 512), Shape(1, 3, 1, 2, 5)], ids=str)
def test_f4fused_conv2d_on_the_gpu(shape, layout, parts):
    from sassas.load import DeviceBuffer, gpu_available
    ok, why = gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    from kernels_sass.winograd import conv2d
    rng = _rng(f"gpu{shape}")
    x = rng.standard_normal((shape.N, shape.C, shape.H, shape.W)).astype(np.float32)
    w = rng.standard_normal((shape.K, shape.C, 3, 3)).astype(np.float32)
    want = ref.direct_conv2d(x, w)
    if layout == "NCHW":
        out = DeviceBuffer.from_numpy(np.full((shape.N, shape.K, shape.H, shape.W), np.nan, np.float32))
        conv2d(DeviceBuffer.from_numpy(x), DeviceBuffer.from_numpy(w), "sass", out=out, algo="f4fused", parts=parts)
        got = out.to_numpy()
    else:
        out = DeviceBuffer.from_numpy(np.full((shape.K, shape.H, shape.W, shape.N), np.nan, np.float32))
        conv2d(DeviceBuffer.from_numpy(ref.to_chwn(x)), DeviceBuffer.from_numpy(np.ascontiguousarray(w.transpose(1, 2, 3, 0))),
               "sass", layout="CHWN", out=out, algo="f4fused", parts=parts)
        got = ref.from_khwn(out.to_numpy())
    assert not np.isnan(got).any()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) <= 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [0, 1, 2])
def test_f4fused_reads_x_at_any_4_byte_offset_on_the_gpu(offset):
    """x a view 4 or 8 bytes into a torch buffer, or y (W = 12: LDG.128 and STG.128 where
    aligned): the kernel of 4-byte loads and stores runs instead, with the same result."""
    from sassas.load import gpu_available
    ok, why = gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    torch = pytest.importorskip("torch")
    from kernels_sass.winograd import conv2d
    s = Shape(5, 9, 6, 12, 40)
    g = torch.Generator(device="cuda").manual_seed(SEED % (1 << 31))
    buf = torch.randn(s.N * s.C * s.H * s.W + offset, device="cuda", generator=g)
    x = buf[offset:].view(s.N, s.C, s.H, s.W)
    w = torch.randn((s.K, s.C, 3, 3), device="cuda", generator=g)
    n_out = s.N * s.K * s.H * s.W
    out = torch.empty(n_out + 3, device="cuda")[3 - offset:3 - offset + n_out].view(s.N, s.K, s.H, s.W)
    got = conv2d(x, w, "sass", algo="f4fused", out=out).cpu().double().numpy()
    want = ref.direct_conv2d(x.cpu().double().numpy(), w.cpu().double().numpy())
    assert np.linalg.norm(got - want) / np.linalg.norm(want) <= 1e-5


def test_recorded_sequences_interleave_and_keep_their_attributes():
    """sched.spread puts one sequence's items evenly among another's (the persistent epilogue's
    set-up among its staging); replay gives the Seq the recorded attributes; an LDGSTS of memory
    nothing writes (read_only) holds no later barrier back through memory."""
    from kernels_sass.winograd.sched import Recorder, Seq, replay, spread
    assert spread(list("abcd"), list("xy"), 1, 3) == list("axbycd")
    assert spread(list("ab"), list("xyz")) == list("xyazb")
    r = Recorder()
    r.op("LDGSTS.E.BYPASS.128 [R7], [R4.U32+UR6]", barriers=(2,), read_only=True)
    r.op("LDGDEPBAR").wb = 3
    q = Seq("sm_90", barriers=(0, 1, 2, 4, 5))
    replay(q, r.items)
    assert q.ops[1].wb == 3 and q.ops[0].rb == 2
    assert q.op("BAR.SYNC.DEFER_BLOCKING 0x0").wait == 0
    q2 = Seq("sm_90", barriers=(0, 1, 2, 4, 5))
    q2.op("LDGSTS.E.BYPASS.128 [R7], [R4.U32+UR6]", barriers=(2,))
    assert q2.op("BAR.SYNC.DEFER_BLOCKING 0x0").wait == 1 << 2
