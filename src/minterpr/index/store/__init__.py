"""A gallery saved on disk: the store folder (:mod:`~minterpr.index.store.gallery_store`), adding
rows to it (:mod:`~minterpr.index.store.gallery_append`) and its saved fused index
(:mod:`~minterpr.index.store.fused_store`). The vector indexes it holds are :mod:`minterpr.index.vectors`."""
