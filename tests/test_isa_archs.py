"""Every arch with a description: it loads, validates, and reproduces its corpus."""
from __future__ import annotations

import pytest

from sassas.isa import oracle
from sassas.isa.model import DATA_DIR

ARCHS = sorted(p.stem for p in DATA_DIR.glob("sm_*.toml"))


@pytest.mark.parametrize("arch", ARCHS)
def test_description_loads(arch):
    from sassas.isa.description import load_description
    isa = load_description(DATA_DIR / f"{arch}.toml")
    assert isa.encodings and isa.forms()


@pytest.mark.parametrize("arch", ARCHS)
def test_corpus_round_trip(arch):
    if not oracle.have_tools(arch):
        pytest.skip(f"ptxas/nvdisasm for {arch} not installed")
    from sassas.isa import corpus, fit, get_isa
    from sassas.isa.learn import check_sample
    isa = get_isa(arch)
    words = corpus.build(arch)
    samples = [s for s in fit.to_samples(oracle.disassemble(words, arch, oracle.DisasmCache(arch))).values() if s]
    bad = [s.text for s in samples if check_sample(isa, s)]
    rate = 1 - len(bad) / len(samples)
    print(f"{arch}: {len(samples) - len(bad)}/{len(samples)} bit-exact ({rate:.1%})")
    assert rate >= 0.85, bad[:10]
