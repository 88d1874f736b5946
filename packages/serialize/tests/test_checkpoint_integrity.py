"""Checkpoints carry an integrity record of their metadata, headers and data, verified on load.

Bytes overwritten anywhere in a checkpoint (not only a truncation, and the record itself too)
are a ``SadlFormatError`` naming the file and the entry; the file stays a plain ``.sadl`` file
of format version 1.
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
    assert integrity["entries"]["model.w"] == {
        "dtype": "float32",
        "shape": [3, 4],
        "crc32": zlib.crc32(model.w.numpy().tobytes()),
    }
    assert meta["version"] == 2  # version-2 documents always carry the record
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
    with pytest.raises(SadlFormatError, match=r"metadata fails its CRC32 check"):
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


def legacy(path):
    """Rewrite ``path`` as an older sadl-serialize wrote it: document version 1, no record."""
    entries = ss.load(path)
    meta = json.loads(entries.pop("__meta__").numpy().tobytes())
    del meta["integrity"]
    meta["version"] = 1
    ss.save({"__meta__": np.frombuffer(json.dumps(meta).encode(), np.uint8), **entries}, path)


def test_a_checkpoint_written_before_the_record_existed_still_loads(tmp_path):
    path, model, _ = saved(tmp_path)
    legacy(path)
    restored, _ = fresh()
    assert ss.load_checkpoint(path, model=restored)["step"] == 3
    np.testing.assert_array_equal(restored.w.numpy(), model.w.numpy())


def test_verify_true_refuses_a_checkpoint_without_a_record(tmp_path):
    path, _, _ = saved(tmp_path)
    legacy(path)
    with pytest.raises(SadlFormatError, match="no integrity record to verify.*verify=False"):
        ss.load_checkpoint(path, verify=True)
    assert ss.load_checkpoint(path, verify=False)["step"] == 3


@pytest.mark.parametrize("edit", ["rename", "remove"])
def test_a_damaged_or_removed_record_is_not_taken_for_an_older_checkpoint(tmp_path, edit):
    path, _, _ = saved(tmp_path)
    overwrite(path, "model.b")  # damaged data, which the record would catch
    raw = path.read_bytes()
    if edit == "rename":  # one byte of the record's key
        path.write_bytes(raw.replace(b'"integrity":', b'"integritx":'))
        message = r"unknown keys \['integritx'\]"
    else:  # the whole record, the document kept valid JSON of the same length
        entries = ss.load(path)
        meta = json.loads(entries.pop("__meta__").numpy().tobytes())
        del meta["integrity"]
        ss.save({"__meta__": np.frombuffer(json.dumps(meta).encode(), np.uint8), **entries}, path)
        message = "integrity record is missing"
    for verify in (None, True):
        with pytest.raises(SadlFormatError, match=message):
            ss.load_checkpoint(path, verify=verify)


def test_an_entry_whose_shape_or_dtype_was_rewritten_is_refused(tmp_path):
    path = tmp_path / "s.sadl"
    ss.save_checkpoint(path, model={"w": np.arange(6.0).reshape(2, 3), "e": np.zeros((0, 4))})
    info = {i.key: i for i in ss.read_index(path)}
    raw = bytearray(path.read_bytes())
    shape_at = info["model.w"].offset - 16  # the two u64 dimensions before the data
    raw[shape_at : shape_at + 16] = (3).to_bytes(8, "little") + (2).to_bytes(8, "little")
    path.write_bytes(bytes(raw))
    assert ss.load(path)["model.w"].shape == (3, 2)  # a valid .sadl file all the same
    with pytest.raises(SadlFormatError, match=r"'model.w' is float64 of shape \(3, 2\)"):
        ss.load_checkpoint(path)
    # An empty entry's dtype and shape change no data byte: the record covers them as well.
    ss.save_checkpoint(path, model={"e": np.zeros((0, 4))})
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"\x07float64", b"\x07float16"))
    with pytest.raises(SadlFormatError, match="'model.e' is float16 of shape"):
        ss.load_checkpoint(path)


def small_checkpoint(path):
    model = {
        "w": np.arange(6, dtype=np.float32).reshape(2, 3),
        "e": np.zeros((0, 2)),
        "m": np.array([True, False]),
    }
    ss.save_checkpoint(path, model=model, step=2, extra={"t": (1, 2.5), "lr": [0.1]})


def flips(raw):
    """Every one-bit change of every byte of ``raw``."""
    for at in range(len(raw)):
        for bit in range(8):
            damaged = bytearray(raw)
            damaged[at] ^= 1 << bit
            yield at, bytes(damaged)


def test_no_single_bit_flip_anywhere_in_a_checkpoint_loads(tmp_path):
    path = tmp_path / "small.sadl"
    small_checkpoint(path)
    raw = path.read_bytes()
    loaded = []
    for at, damaged in flips(raw):
        path.write_bytes(damaged)
        try:
            ss.load_checkpoint(path)
        except SadlFormatError:
            continue
        loaded.append(at)
    assert not loaded, f"damage at bytes {loaded[:10]} of {len(raw)} loaded"


def test_every_byte_value_of_the_version_and_the_record_key_is_refused(tmp_path):
    path = tmp_path / "small.sadl"
    small_checkpoint(path)
    raw = path.read_bytes()
    places = [raw.index(b'"version": 2') + 11]  # the version digit
    places += range(raw.index(b'"integrity"'), raw.index(b'"integrity"') + 12)
    for at in places:
        for value in range(256):
            if value == raw[at]:
                continue
            path.write_bytes(raw[:at] + bytes([value]) + raw[at + 1 :])
            with pytest.raises(SadlFormatError):
                ss.load_checkpoint(path)


def test_a_checkpoint_with_the_earlier_data_only_record_is_still_verified(tmp_path):
    path, _, _ = saved(tmp_path)
    entries = ss.load(path)
    meta = json.loads(entries.pop("__meta__").numpy().tobytes())
    del meta["integrity"]
    meta["version"] = 1  # as the previous release wrote it: a CRC32 of each entry's data only
    body = json.dumps(meta, allow_nan=False, ensure_ascii=False).encode()
    meta["integrity"] = {
        "algorithm": "crc32",
        "meta": zlib.crc32(body),
        "entries": {
            k: zlib.crc32(np.ascontiguousarray(v.numpy()).tobytes()) for k, v in entries.items()
        },
    }
    document = json.dumps(meta, allow_nan=False, ensure_ascii=False).encode()
    ss.save({"__meta__": np.frombuffer(document, np.uint8), **entries}, path)
    assert ss.load_checkpoint(path, verify=True)["step"] == 3
    overwrite(path, "model.w")
    with pytest.raises(SadlFormatError, match="'model.w' fails its CRC32 check"):
        ss.load_checkpoint(path)
