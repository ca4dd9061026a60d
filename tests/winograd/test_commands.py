"""`python -m kernels_sass.winograd`'s refusals: a shape, arch, file or combination it cannot take
gets one line and a non-zero exit, never a traceback; the GPU commands say so where there is no
GPU. CPU only."""
from __future__ import annotations

import json

import pytest

from kernels_sass.winograd.__main__ import main


def _refusal(capsys, argv) -> tuple[int, str]:
    """(exit status, the last line on stderr) of a command that must refuse."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    code = e.value.code
    if isinstance(code, str):           # SystemExit(message): Python prints it, status 1
        return 1, code
    return code, capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("argv, code, message", [
    (["sass", "0", "4", "4", "4", "4"], 2, "argument DIM: '0': N, C, H, W and K are positive integers"),
    (["sass", "1", "2", "3", "4", "5", "--arch", "sm_99"], 2, "argument --arch: unknown architecture 'sm_99'"),
    (["sim", "1", "2", "3", "4", "5", "--arch", "sm_70"], 2, "argument --arch: sm_70: the kernels are generated for sm_75"),
    (["sass", "1", "2", "3", "4", "5", "--split", "9"], 1, "sass: split 9 x 0 tiles does not fit Shape(N=1"),
    (["sim", "1", "1", "1", "1", "1", "--algo", "f4fused", "--arch", "sm_80"], 1,
     "sim: sm_80: the fused F(4x4,3x3) kernel takes 205952 bytes of shared memory a block, the arch 166912"),
    (["model", "--shape", "2", "3", "x", "4", "5", "--gpu", "H200"], 2, "argument --shape: 'x': N, C, H, W and K"),
    (["report", "{tmp}/missing.json"], 1, "report: {tmp}/missing.json: No such file or directory"),
    (["report", "{tmp}/text.json"], 1, "report: {tmp}/text.json: not a JSON file (Expecting value"),
    (["report", "{tmp}/other.json"], 1, "report: {tmp}/other.json: not a run of `bench` (a JSON object with 'info' and"),
    (["model", "{tmp}/other.json"], 1, "model: {tmp}/other.json: not a run of `bench` (a JSON object with 'info' and "
                                       "'results')"),
])
def test_refusals_are_one_line(capsys, tmp_path, argv, code, message):
    (tmp_path / "text.json").write_text("EXIT;\n")
    (tmp_path / "other.json").write_text(json.dumps({"rows": []}))
    got_code, line = _refusal(capsys, [a.format(tmp=tmp_path) for a in argv])
    assert got_code == code and message.format(tmp=tmp_path) in line, line


def test_gpu_commands_say_there_is_no_gpu(capsys):
    from sassas.load import gpu_available
    if gpu_available()[0]:
        pytest.skip("a GPU is present")
    code, line = _refusal(capsys, ["bench", "--configs", "Conv2/N32"])
    assert code == 1 and line.startswith("bench: needs an NVIDIA GPU (") and line.endswith(
        "the CPU commands are sass, sim, report, model (--gpu with --shape), prebuild")


def test_a_wrong_ablation_is_refused_before_the_gpu_is_looked_for(capsys):
    code, line = _refusal(capsys, ["bench", "--ablation", "--algo", "f4"])
    assert code == 1 and line.startswith("bench --ablation --algo f4: expected f2")
