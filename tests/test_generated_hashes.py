"""Every generated SASS text, cubin and CPU command output is the one recorded in
tests/data/generated_hashes.json (tools/generated_hashes.py lists the items). A change meant to
alter output regenerates the table: `python tools/generated_hashes.py --write`."""

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import generated_hashes  # noqa: E402


@pytest.mark.parametrize("part", list(generated_hashes.PARTS))
def test_generated_output_unchanged(part):
    with open(generated_hashes.BASELINE) as f:
        want = json.load(f)
    got = generated_hashes.table([part])
    diffs = generated_hashes.compare(got, want)
    assert not diffs, f"{len(diffs)} of {len(got[part])} items differ:\n" + "\n".join(diffs[:40])
