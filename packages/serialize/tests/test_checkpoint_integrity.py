"""Checkpoints carry CRC32 checksums of their data and metadata, verified on load.

Bytes overwritten anywhere in a checkpoint (not only a truncation) are a ``SadlFormatError``
naming the file and the entry; the file stays a plain ``.sadl`` file of format version 1.
"""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest
import sadl
import sadl_serialize as ss
from sadl_serialize import SadlFormatError


def saved(tmp_path, name="c.sadl"):
    model = sadl.nn.Module()
    model.w = sadl.Parameter(np.arange(12, dtype=np.float32).reshape(3, 4) / 7)
    model.b = sadl.Parameter(np.ones(4, dtype=np.float64))
    optimizer = sadl.Adam(model.parameters(), lr=1e-3)
    (model.w.sum() * 2 + model.b.sum()).backward()
    optimizer.step()
    path = tmp_path / name
    ss.save_checkpoint(path, model=model, optimizer=optimizer, step=3, extra={"loss": 0.25})
    return path, model, optimizer


def overwrite(path, key, data=b"\x13\x37\x00\xff", at=5):
    """Overwrite a few bytes of ``key``'s data in place, inside the data region."""
    info = next(i for i in ss.read_index(path) if i.key == key)
    raw = bytearray(path.read_bytes())
    raw[info.offset + at : info.offset + at + len(data)] = data
    path.write_bytes(bytes(raw))


def fresh():
    model = sadl.nn.Module()
    model.w = sadl.Parameter(np.zeros((3, 4), dtype=np.float32))
    model.b = sadl.Parameter(np.zeros(4))
    return model, sadl.Adam(model.parameters(), lr=0.5)


def test_the_checksums_are_in_the_metadata_and_the_file_stays_plain_sadl(tmp_path):
    path, model, _ = saved(tmp_path)
    entries = ss.load(path)  # any .sadl reader (py-sadl 2.0.0 included) reads it
    meta = json.loads(entries.pop("__meta__").numpy().tobytes())
    integrity = meta.pop("integrity")
    assert integrity["algorithm"] == "crc32" and set(integrity["entries"]) == set(entries)
    assert integrity["entries"]["model.w"] == zlib.crc32(model.w.numpy().tobytes())
    body = json.dumps(meta, allow_nan=False, ensure_ascii=False).encode()
    assert integrity["meta"] == zlib.crc32(body)


@pytest.mark.parametrize("key", ["model.w", "model.b", "optimizer.state.0.exp_avg_sq"])
def test_bytes_overwritten_in_the_data_region_are_refused(tmp_path, key):
    path, _, _ = saved(tmp_path)
    overwrite(path, key)
    assert ss.load(path)  # a valid .sadl file all the same: only the checksum sees it
    model, optimizer = fresh()
    with pytest.raises(SadlFormatError, match="fails its CRC32 check") as raised:
        ss.load_checkpoint(path, model=model, optimizer=optimizer)
    assert str(path) in str(raised.value) and repr(key) in str(raised.value)
    assert not model.w.numpy().any() and optimizer.param_groups[0]["lr"] == 0.5  # untouched


def test_a_changed_value_in_the_metadata_is_refused(tmp_path):
    path, _, _ = saved(tmp_path)
    raw = path.read_bytes()
    assert raw.count(b'"step": 3') == 1
    path.write_bytes(raw.replace(b'"step": 3', b'"step": 8'))  # same length, valid JSON
    with pytest.raises(SadlFormatError, match=r"metadata \('__meta__'\) fails its CRC32 check"):
        ss.load_checkpoint(path)


def test_an_entry_added_or_removed_is_refused(tmp_path):
    path, _, _ = saved(tmp_path)
    entries = ss.load(path)
    ss.save({**entries, "model.extra": np.zeros(2)}, path)
    with pytest.raises(
        SadlFormatError, match=r"do not match its checksum record \(\['model.extra'\]"
    ):
        ss.load_checkpoint(path)


def test_verify_false_and_memory_mapped_reads_skip_the_check(tmp_path):
    path, _, _ = saved(tmp_path)
    overwrite(path, "model.b")
    assert ss.load_checkpoint(path, verify=False)["step"] == 3
    mapped = ss.load_checkpoint(path, mmap=True)  # lazy: the check would read every page
    assert mapped["step"] == 3 and not mapped["model"]["b"].data.flags.owndata  # a mapped view
    with pytest.raises(SadlFormatError, match="'model.b'"):
        ss.load_checkpoint(path, mmap=True, verify=True)


def test_a_checkpoint_written_without_checksums_still_loads(tmp_path):
    path, model, _ = saved(tmp_path)
    entries = ss.load(path)
    meta = json.loads(entries.pop("__meta__").numpy().tobytes())
    del meta["integrity"]  # as checkpoints were written before the record existed
    ss.save({"__meta__": np.frombuffer(json.dumps(meta).encode(), np.uint8), **entries}, path)
    restored, _ = fresh()
    assert ss.load_checkpoint(path, model=restored)["step"] == 3
    np.testing.assert_array_equal(restored.w.numpy(), model.w.numpy())
