"""Dataset file formats: readers, writers and validation.

Every reader names each problem by file, line and field (:class:`~minterpr.data.errors.DataError`),
reads strictly by default (the first problem raises) and leniently with ``strict=False``
(returns ``(records, report)``, see :class:`ReadResult`).

Example:
    >>> from minterpr.data.formats import read_minterpedes, write_gallery  # doctest: +SKIP
"""

from __future__ import annotations

from minterpr.data.formats.chatpedes import iter_chatpedes, read_chatpedes, write_chatpedes
from minterpr.data.formats.gallery import iter_gallery, read_gallery, write_gallery
from minterpr.data.formats.jsonl import ReadResult, iter_json_lines
from minterpr.data.formats.minterpedes import iter_minterpedes, read_minterpedes, write_minterpedes

from minterpr.data.formats.captions import CaptionRecord, captions_to_samples, read_caption_dataset
from minterpr.data.formats.market import market_images, read_market_attributes
from minterpr.data.formats.pa100k import read_pa100k
from minterpr.data.formats.peta import peta_subsets, read_peta

__all__ = [
    # dialogue datasets and gallery manifests
    "ReadResult",
    "iter_json_lines",
    "iter_minterpedes",
    "read_minterpedes",
    "write_minterpedes",
    "iter_chatpedes",
    "read_chatpedes",
    "write_chatpedes",
    "iter_gallery",
    "read_gallery",
    "write_gallery",
    # caption datasets (CUHK-PEDES, ICFG-PEDES, RSTPReid, TBPS-CLIP)
    "CaptionRecord",
    "read_caption_dataset",
    "captions_to_samples",
    # attribute datasets
    "read_peta",
    "peta_subsets",
    "read_pa100k",
    "read_market_attributes",
    "market_images",
]
