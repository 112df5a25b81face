"""Train the 2D TEz point-source problem and write its fields to HDF5/XDMF.

    python examples/maxwell_point_source_2d.py --preset ci --out out
    mpirun -n 2 python examples/maxwell_point_source_2d.py --steps 20 --out out

Takes the options of ``elecsolver run`` (see ``elecsolver run --help``).
"""

import sys

from elecsolver.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", "maxwell-point-source-2d", *sys.argv[1:]]))
