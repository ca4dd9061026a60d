"""sassas.cache: derived files named by a hash of their sources; a new one replaces the older
ones of its kind, and none is needed to run."""
import pickle

from sassas import cache


def test_a_made_file_is_read_back_and_replaces_the_older_ones_of_its_kind(tmp_path, monkeypatch):
    monkeypatch.setenv("SASSAS_CACHE_DIR", str(tmp_path))
    (tmp_path / "isa-sm_90-0000aaaa.pickle").write_bytes(pickle.dumps({"old": 1}))
    (tmp_path / "isa-sm_90-extra-0000bbbb.pickle").write_bytes(b"another kind")
    (tmp_path / "isa-sm_80-0000cccc.pickle").write_bytes(b"another arch")
    made = []
    value = cache.through_pickle("isa-sm_90-1111dddd.pickle", dict, lambda: made.append(1) or {"new": 2})
    assert value == {"new": 2} and made == [1]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "isa-sm_80-0000cccc.pickle", "isa-sm_90-1111dddd.pickle", "isa-sm_90-extra-0000bbbb.pickle"]
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
