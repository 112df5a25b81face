"""Everything that talks to other ranks: launch, the device mesh, data / tensor / pipeline parallelism, ZeRO,
recompute, mixed precision with loss scaling, profiling and failure handling (docs/parallel.md).

The core (``elecsolver``) never imports this package; ``elecsolver.cli`` composes it.
"""

from .data_parallel import apply_data_parallel, init_data_parallel, shutdown
from .mesh import DeviceMesh, MeshError
from .strategy import ParallelOptions, apply_parallelism

__all__ = ["DeviceMesh", "MeshError", "ParallelOptions", "apply_data_parallel", "apply_parallelism",
           "init_data_parallel", "shutdown"]
