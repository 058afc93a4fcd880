"""Nearest-neighbour search over gallery embeddings: the :class:`~minterpr.index.vectors.vector_index.VectorIndex`
protocol and its registry (:mod:`~minterpr.index.vectors.vector_index`), the exact, FAISS and Qdrant backends,
metadata filters and the row store they share. Below :mod:`minterpr.index.store`, which saves them."""
