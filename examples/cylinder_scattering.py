"""Train the plane wave scattered by a PEC cylinder (``pec-cylinder-scattering``) and write the complex fields to
HDF5 + XDMF and PNG.

    python examples/cylinder_scattering.py --preset ci --out out-cyl
    mpirun -n 2 python examples/cylinder_scattering.py --preset ci --out out-cyl
    python examples/cylinder_scattering.py --set scattering.polarisation=TE --out out-cyl-te

Writes ``fields.h5`` (the scattered field ``Ez`` (TM, V/m) or ``Hz`` (TE, A/m) and the total field
``Ez_total`` / ``Hz_total`` as complex values on the window's grid, time convention exp(-i omega t), with the
Bessel/Hankel series under ``/reference`` and the sites inside the cylinder masked), ``fields.xdmf`` for
ParaView (real part, imaginary part and magnitude of each complex field), ``metrics.json`` (relative L2 with
the complex modulus) and ``Ez.png`` / ``Ez_total.png`` (real part and magnitude of the PINN, the series and the
error).  Takes the options of ``elecsolver run``.
"""

import sys

from elecsolver.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", "pec-cylinder-scattering", *sys.argv[1:]]))
