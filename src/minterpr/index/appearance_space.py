"""The space appearance vectors are compared in: about their gallery's centre.

A camera adds a component common to all its crops (light, background, angle). Among the street
video's crops two *different* people have an appearance cosine of 0.33 on average, against 0.03
among CUHK03 val's, so a same-person calibration fitted on val calls the footage's look-alikes
the same person. Comparing each vector less the gallery's centre (:func:`appearance_centre`),
re-normalised (:func:`centre_vectors`), takes that component out; a calibration fitted so
(:class:`minterpr.interaction.appearance.SamePersonCalibration` with ``centred``, opt-in:
``minterpr calibrate appearance --centred``) makes galleries compare their crops in this space.
:meth:`minterpr.index.gallery_index.GalleryIndex.compared_appearance` gives a gallery's vectors in this space.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> vectors = 2.0 * np.ones(16) + rng.normal(size=(200, 16))  # 200 people of one camera
    >>> vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    >>> round(float(vectors[0] @ vectors[1]), 2)  # two different people look alike
    0.88
    >>> moved = centre_vectors(vectors, appearance_centre(vectors))
    >>> round(float(moved[0] @ moved[1]), 2)  # about the camera's centre, much less
    0.28
"""

from __future__ import annotations

import numpy as np

__all__ = ["CENTRE_PRIOR", "appearance_centre", "centre_vectors"]

# a gallery of n images has its centre n / (n + CENTRE_PRIOR) of the way from 0 to its mean: the mean of a
#   handful of crops is more those people than the camera (two crops would otherwise be compared as opposites)
CENTRE_PRIOR = 16


def appearance_centre(vectors: np.ndarray) -> np.ndarray:
    """(A,) the point a gallery's (N, A) appearance vectors are compared about (module doc).

    >>> [round(float(x), 3) for x in appearance_centre(np.array([[1.0, 0.0], [0.0, 1.0]]))]
    [0.056, 0.056]
    """
    vectors = np.asarray(vectors)
    if vectors.ndim != 2 or len(vectors) == 0:
        raise ValueError(f"appearance_centre: needs (N, A) vectors with N >= 1, got shape {vectors.shape}")
    mean = vectors.mean(axis=0, dtype=np.float64)  # accumulated in float64, without a float64 copy of the rows
    return (len(vectors) / (len(vectors) + CENTRE_PRIOR) * mean).astype(np.float32)


def centre_vectors(vectors: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """``vectors`` ((..., A)) minus ``centre``, L2-normalised again (float32): what centred comparisons take
    the cosine of. A vector at the centre itself stays a zero vector (cosine 0 with everything).

    >>> centre_vectors(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([0.5, 0.5])).astype(np.float64).round(3).tolist()
    [[0.707, -0.707], [-0.707, 0.707]]
    """
    out = np.asarray(vectors, dtype=np.float32) - np.asarray(centre, dtype=np.float32)
    norms = np.linalg.norm(out, axis=-1, keepdims=True)
    return np.ascontiguousarray(out / np.where(norms > 0, norms, 1.0), dtype=np.float32)
