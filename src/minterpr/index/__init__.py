"""Gallery indexing and search."""

from minterpr.index.gallery_index import GalleryIndex, RetrievalBackend

__all__ = ["GalleryIndex", "RetrievalBackend"]
