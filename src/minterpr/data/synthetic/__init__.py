"""A licence-free synthetic pedestrian world: identities from the attribute ontology, rendered images.

minterpr runs its demo and tests on this world, with no outside data: identities are sampled
with real-world attribute correlations (plus near-twins that differ in one slot), cameras have
their own scenes and colour responses, and each image is drawn with numpy and Pillow.

Example:
    >>> import numpy as np
    >>> attrs = sample_identity(np.random.default_rng(0))
    >>> cam = make_cameras(2, np.random.default_rng(0))[0]
    >>> render_person(attrs, view="side", camera=cam, rng=np.random.default_rng(0)).size
    (128, 256)
"""

from minterpr.data.synthetic.cameras import CameraStyle, make_cameras
from minterpr.data.synthetic.identities import sample_identity
from minterpr.data.synthetic.render import render_person
from minterpr.data.synthetic.render_look import Look, sample_look
from minterpr.data.synthetic.twins import make_twin, sample_population, sample_population_with_twins
from minterpr.data.synthetic.world import (
    SyntheticWorldConfig,
    WorldPlan,
    build_world,
    make_sample_grid,
    plan_world,
    render_grid,
)

__all__ = [
    "CameraStyle",
    "Look",
    "SyntheticWorldConfig",
    "WorldPlan",
    "build_world",
    "make_cameras",
    "make_sample_grid",
    "make_twin",
    "plan_world",
    "render_grid",
    "render_person",
    "sample_identity",
    "sample_look",
    "sample_population",
    "sample_population_with_twins",
]
