"""Geometry: domains to sample collocation points from.

Primitives (:class:`Interval`, :class:`Rectangle`, :class:`Disk`, :class:`Polygon`, :class:`Box`,
:class:`Sphere`, :class:`Cylinder`), set operations (``|``, ``&``, ``-``: :class:`Union`,
:class:`Intersection`, :class:`Difference`), space-time domains (:class:`TimeDomain`) and simplex
meshes read with meshio (:class:`MeshDomain`).  Every domain draws interior points and boundary
points with outward unit normals and tags, as :class:`TaggedCloud` (a
:class:`~elecsolver.sampling.PointCloud` with ``tags``).
"""

from .base import BOUNDARY_METHODS, INTERIOR_METHODS, Domain, TaggedCloud
from .csg import CSGDomain, Difference, Intersection, Union
from .mesh import MeshDomain
from .primitives import Box, Cylinder, Disk, Interval, Polygon, Rectangle, Sphere
from .timedomain import TimeDomain

__all__ = [
    "BOUNDARY_METHODS",
    "INTERIOR_METHODS",
    "Box",
    "CSGDomain",
    "Cylinder",
    "Difference",
    "Disk",
    "Domain",
    "Intersection",
    "Interval",
    "MeshDomain",
    "Polygon",
    "Rectangle",
    "Sphere",
    "TaggedCloud",
    "TimeDomain",
    "Union",
]
