"""sassas.cache: derived files named by a hash of their sources; a new one replaces the oldest
of its kind (a few stay), and none is needed to run."""
import os
import pickle

from sassas import cache


def test_a_made_file_is_read_back_and_replaces_the_oldest_of_its_kind(tmp_path, monkeypatch):
    monkeypatch.setenv("SASSAS_CACHE_DIR", str(tmp_path))
    # five of a kind made earlier, oldest first (and two of other kinds)
    older = [f"isa-sm_90-{k}000aaaa.pickle" for k in range(5)]
    for age, name in enumerate(older):
        path = tmp_path / name
        path.write_bytes(pickle.dumps({"old": age}))
        os.utime(path, ns=(10**18 + age, 10**18 + age))
    (tmp_path / "isa-sm_90-extra-0000bbbb.pickle").write_bytes(b"another kind")
    (tmp_path / "isa-sm_80-0000cccc.pickle").write_bytes(b"another arch")
    made = []
    value = cache.through_pickle("isa-sm_90-1111dddd.pickle", dict, lambda: made.append(1) or {"new": 2})
    assert value == {"new": 2} and made == [1]
    # the new one and the KEPT_OF_A_KIND - 1 newest before it stay (two versions used in turn
    # keep theirs); the other kinds are left alone
    kept = older[-(cache.KEPT_OF_A_KIND - 1):]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["isa-sm_80-0000cccc.pickle", "isa-sm_90-1111dddd.pickle", "isa-sm_90-extra-0000bbbb.pickle", *kept])
    # read back, not made again
    assert cache.through_pickle("isa-sm_90-1111dddd.pickle", dict, lambda: made.append(2) or {}) == {"new": 2}
    assert made == [1]


def test_an_unwritable_cache_is_passed_by(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("SASSAS_CACHE_DIR", str(blocked / "sassas"))
    assert cache.through_pickle("toml-x-1234.pickle", dict, lambda: {"made": True}) == {"made": True}
    # a damaged file is made again
    monkeypatch.setenv("SASSAS_CACHE_DIR", str(tmp_path))
    (tmp_path / "toml-x-1234.pickle").write_bytes(b"\x80\x05damaged")
    assert cache.through_pickle("toml-x-1234.pickle", dict, lambda: {"again": 1}) == {"again": 1}
