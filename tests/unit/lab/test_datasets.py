"""Datasets in the paper's shapes and the checksums that prove a copy arrived intact."""

from __future__ import annotations

import pytest

from viplanes.lab.datasets import digests, make_dataset, same_content, seed


@pytest.mark.parametrize("shape, files", [("one", 1), ("split10", 10), ("split50", 50)])
def test_shapes_hold_the_whole_size(tmp_path, shape, files):
    ds = make_dataset(tmp_path, shape, 3)
    found = sorted(ds.path.iterdir())
    assert len(found) == files == ds.files
    assert sum(f.stat().st_size for f in found) == 3 * 2**20 == ds.bytes


def test_reused_when_intact_and_remade_when_damaged(tmp_path):
    ds = make_dataset(tmp_path, "split10", 1)
    before = digests(ds.path)
    assert digests(make_dataset(tmp_path, "split10", 1).path) == before  # reused as is
    (ds.path / "part03").write_bytes(b"short")
    assert digests(make_dataset(tmp_path, "split10", 1).path) != before  # regenerated
    assert (ds.path / "part03").stat().st_size > 5


def test_seed_and_same_content(tmp_path):
    ds = make_dataset(tmp_path / "d", "split10", 1)
    seed(ds, tmp_path / "s3" / "lab")
    assert same_content(ds.path, tmp_path / "s3" / "lab")
    victim = tmp_path / "s3" / "lab" / "part00"
    data = bytearray(victim.read_bytes())
    victim.unlink()  # a hard link: write a fresh file so the source stays untouched
    data[0] ^= 1
    victim.write_bytes(bytes(data))
    assert not same_content(ds.path, tmp_path / "s3" / "lab")


def test_bad_shape_or_size(tmp_path):
    with pytest.raises(ValueError, match="shape"):
        make_dataset(tmp_path, "split3", 1)
    with pytest.raises(ValueError, match="size"):
        make_dataset(tmp_path, "one", 0)
