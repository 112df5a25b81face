"""Train the TE_101 mode of a PEC box (``maxwell-cavity-3d``) and write its fields to HDF5 + XDMF and PNG.

    python examples/cavity_3d.py --preset ci --out out-cav3d
    mpirun -n 2 python examples/cavity_3d.py --preset ci --out out-cav3d
    python examples/cavity_3d.py --set mode.m=1 --set mode.n=1 --set mode.p=1 --out out-te111

Writes ``fields.h5`` (Ex ... Hz on the x, y, z grid at every output time, in V/m and A/m, with the closed form
under ``/reference``), ``fields.xdmf`` for ParaView, ``metrics.json`` (relative L2 per field; a field that
vanishes in the mode, such as Ez of a TE mode, relative to the norm of all E components) and PNG files
(``Ey_t0.59ns.png``, ...) with the PINN, the closed form and the error on the mid-z slice at four times.  Takes the options of ``elecsolver run``.
"""

import sys

from elecsolver.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", "maxwell-cavity-3d", *sys.argv[1:]]))
