from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sadl_models.corpus import (
    CorpusError,
    builtin_corpus,
    read_text,
    split_tokens,
    unigram_cross_entropy,
)
from sadl_models.tokenizers import (
    ByteTokenizer,
    CharTokenizer,
    TokenizerError,
    make_tokenizer,
    tokenizer_from_dict,
)


def test_char_tokenizer_round_trip_and_ids():
    tok = CharTokenizer.from_text("hello world")
    assert tok.chars == " dehlorw"
    ids = tok.encode("hello")
    assert ids.dtype == np.int64
    assert ids.tolist() == [3, 2, 4, 4, 5]
    assert tok.decode(ids) == "hello"
    assert tok.decode([0, 1]) == " d"


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1, max_size=60))
def test_char_tokenizer_round_trips_any_text(text):
    tok = CharTokenizer.from_text(text)
    assert tok.decode(tok.encode(text)) == text
    again = tokenizer_from_dict(json.loads(json.dumps(tok.to_dict())))
    assert again == tok
    assert again.encode(text).tolist() == tok.encode(text).tolist()


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=60))
def test_byte_tokenizer_round_trips_any_text(text):
    tok = ByteTokenizer()
    ids = tok.encode(text)
    assert ids.tolist() == list(text.encode("utf-8"))
    assert tok.decode(ids) == text
    assert tokenizer_from_dict(json.loads(json.dumps(tok.to_dict()))) == tok


def test_char_tokenizer_names_unknown_characters():
    tok = CharTokenizer.from_text("abc")
    with pytest.raises(TokenizerError, match=r"not in the tokenizer's vocabulary of 3: 'z'"):
        tok.encode("abz")
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        tok.decode([0, 7])


def test_byte_tokenizer_decodes_broken_utf8_with_replacement():
    tok = ByteTokenizer()
    ids = tok.encode("é")[:1]  # half a character
    assert tok.decode(ids) == "\ufffd"


def test_tokenizer_bad_saved_forms():
    with pytest.raises(TokenizerError, match="unknown saved tokenizer kind"):
        tokenizer_from_dict({"kind": "bpe"})
    with pytest.raises(TokenizerError, match="no 'chars'"):
        tokenizer_from_dict({"kind": "char"})
    with pytest.raises(TokenizerError, match="more than once"):
        CharTokenizer("aa")
    with pytest.raises(TokenizerError, match="unknown tokenizer"):
        make_tokenizer("words", "abc")


def test_builtin_corpus_is_english_text():
    text = builtin_corpus()
    assert len(text) > 300_000
    assert "statement" in text and "The " in text
    assert builtin_corpus() == text  # deterministic


def test_read_text_errors(tmp_path):
    with pytest.raises(CorpusError, match="no such file"):
        read_text(tmp_path / "missing.txt")
    with pytest.raises(CorpusError, match="is a directory"):
        read_text(tmp_path)
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\u00e9 ol\u00e9".encode("latin-1"))
    with pytest.raises(CorpusError, match=r"not UTF-8 text \(byte 0xe9 at offset 3"):
        read_text(bad)
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    with pytest.raises(CorpusError, match="empty"):
        read_text(empty)
    good = tmp_path / "good.txt"
    good.write_bytes("\ufeffhello\n".encode())
    assert read_text(good) == "hello\n"


def test_split_and_unigram_baseline():
    tokens = np.arange(100) % 4
    train, val = split_tokens(tokens, 0.1)
    assert len(train) == 90 and len(val) == 10
    assert np.array_equal(np.concatenate([train, val]), tokens)
    # Train counts 23, 23, 22, 22 (+1 smoothing over 94); val holds 0 and 1 twice, 2 and 3 thrice.
    expected = -(4 * np.log(24 / 94) + 6 * np.log(23 / 94)) / 10
    assert unigram_cross_entropy(train, val, 4) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(CorpusError):
        split_tokens(tokens, 1.5)
