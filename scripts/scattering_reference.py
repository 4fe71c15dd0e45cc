#!/usr/bin/env python3
"""Reference outputs of Kymatio's 2-D scattering transform for tests/scattering.rs.

Writes tests/data/scattering_reference.bin: the inputs and Kymatio's outputs for a few small
pseudo-random images, so that dpx's own implementation (src/data/scattering.rs) can be checked
against the standard one.

Run from the repository root, in an environment with the versions the committed file was
made with (kymatio 0.3.0, numpy 2.0.2, scipy 1.14.1, Python 3.11; kymatio 0.3.0 needs
scipy < 1.15, which still has scipy.special.sph_harm):

    python3 -m venv venv && venv/bin/pip install kymatio==0.3.0 numpy==2.0.2 scipy==1.14.1
    venv/bin/python scripts/scattering_reference.py

Pixels are frac(sin(i * 12.9898) * 43758.5453) for i = seed, seed + 1, ... (rounded to f32);
they are stored in the file too, so the test never has to regenerate them.

Format (all little-endian): b"DPXSCREF", u32 number of cases, then per case
u32 C, H, W, J, L, the C*H*W input pixels as f32 (channel-major) and the C*K*(H/2^J)*(W/2^J)
outputs as f32, K = 1 + J*L + L*L*J*(J-1)/2, in Kymatio's order (Scattering2D(...)(x) of shape
[C, K, H/2^J, W/2^J]). Kymatio computes in float64 here (the input is passed as float64).
"""
import struct
import sys

import numpy as np
from kymatio.numpy import Scattering2D

# (C, H, W, J, L, seed)
CASES = [
    (1, 16, 16, 2, 8, 1),
    (1, 16, 16, 2, 8, 1001),
    (3, 32, 32, 2, 8, 5001),
    (1, 16, 16, 3, 4, 9001),
    (2, 8, 12, 1, 6, 12001),
]


def pixels(n, seed):
    i = np.arange(seed, seed + n, dtype=np.float64)
    v = np.sin(i * 12.9898) * 43758.5453
    return (v - np.floor(v)).astype(np.float32)


def main(path="tests/data/scattering_reference.bin"):
    out = [b"DPXSCREF", struct.pack("<I", len(CASES))]
    for c, h, w, j, l, seed in CASES:
        x = pixels(c * h * w, seed).reshape(c, h, w)
        s = Scattering2D(J=j, shape=(h, w), L=l, max_order=2)(x.astype(np.float64))
        k = 1 + j * l + l * l * j * (j - 1) // 2
        assert s.shape == (c, k, h >> j, w >> j), s.shape
        out.append(struct.pack("<5I", c, h, w, j, l))
        out.append(x.astype("<f4").tobytes())
        out.append(s.astype("<f4").tobytes())
        print(f"{c}x{h}x{w} J={j} L={l}: max |S| = {np.abs(s).max():.6f}", file=sys.stderr)
    with open(path, "wb") as f:
        f.write(b"".join(out))


if __name__ == "__main__":
    main(*sys.argv[1:])
