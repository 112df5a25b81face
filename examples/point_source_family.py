"""A family of point sources: one training, then a sweep, a probe trace and an inversion.

    python examples/point_source_family.py --preset ci --out out-family      # about a minute and a half
    python examples/point_source_family.py --out out-family                  # quick (about half an hour)

Trains ``maxwell-point-source-family`` (the options of ``elecsolver run``), then, from the trained run:
- a sweep of the centre frequency, one folder of files per configuration (``OUT/sweep/f<GHz>/fields.h5``);
- the time traces of Hz at four probes for a source at (0.45, 0.52) m, 1.05 GHz;
- the inversion of those traces, with 1 % noise, for the source's position and frequency.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

import elecsolver as es
from elecsolver.cli import main

PLACES = np.array([[0.2, 0.2], [0.8, 0.2], [0.2, 0.8], [0.8, 0.8]])  # probes, m


def after(out: Path) -> None:
    model = es.load(out)
    for f in (0.85e9, 1.0e9, 1.15e9):  # a sweep: one dataset per configuration
        fields = model.fields({"source.frequency": f})
        es.write(fields, out / "sweep" / f"f{f / 1e9:.2f}GHz" / "fields.h5")
        print(f"f = {f / 1e9:.2f} GHz: peak |Hz| {np.abs(fields.fields['Hz']).max():.3e} A/m", flush=True)
    times = np.linspace(0.5e-9, 4e-9, 36)
    truth = {"x0": 0.45, "y0": 0.52, "f": 1.05e9}
    hz = model.probe(PLACES, times, truth)["Hz"]  # [4, 36] A/m
    rng = np.random.default_rng(0)
    noisy = hz + 0.01 * np.sqrt(np.mean(hz**2)) * rng.standard_normal(hz.shape)
    found = es.invert(model, PLACES, times, {"Hz": noisy})
    c = found["configuration"]
    print(f"inverted: x0 = {c['x0']:.4f} m, y0 = {c['y0']:.4f} m, f = {c['f'] / 1e9:.4f} GHz "
          f"(truth 0.45, 0.52, 1.05; misfit {found['misfit']:.2e}, {found['wall_s']:.2f} s)", flush=True)


if __name__ == "__main__":
    code = main(["run", "maxwell-point-source-family", *sys.argv[1:]])
    if code == 0:
        parser = argparse.ArgumentParser(add_help=False)
        parser.add_argument("--out", default="out")
        after(Path(parser.parse_known_args(sys.argv[1:])[0].out))
    sys.exit(code)
