#!/usr/bin/env python3
"""Check a dpx model file against dpx's own logits, independently of dpx.

Usage: check_model_file.py MODEL.safetensors INPUTS.f32 LOGITS.f32

Reads the model with the `safetensors` package, rebuilds the network from the `model_spec`
in its `dpx` metadata, runs the forward pass in NumPy (float64, PyTorch's layouts: images
[N, C, H, W], conv weights [C_out, C_in, kh, kw], dense weights [out, in]) on the inputs
(little-endian f32, one row of input_shape features per example; a conv layer with
`weight_standardization` uses its weight standardised per output channel over C_in·kh·kw,
(W − mean) / sqrt(biased variance + 1e-5), Qiao et al. 2019 eq. 2; `residual_save` pushes the activation on a stack and `residual_add`
pops it and adds it, subsampled by the integer stride and zero-padded with new channels or
features at the end when the block changed the shape: He et al. 2016's option A), and compares with the
logits dpx computed (little-endian f32). Exits 1 when any logit differs by more than
1e-5 * max(1, |logit|). Needs: numpy, safetensors.
"""
import json
import sys

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from safetensors import safe_open
from safetensors.numpy import load_file

TOLERANCE = 1e-5


def windows(x, kernel, stride):
    """[N, C, H, W] -> [N, C, OH, OW, k, k] windows moved by `stride`."""
    w = sliding_window_view(x, (kernel, kernel), axis=(2, 3))
    return w[:, :, ::stride, ::stride]


def forward(spec, tensors, x):
    shape = spec["input_shape"]
    x = x.astype(np.float64).reshape([x.shape[0]] + list(shape))
    skips = []
    for i, layer in enumerate(spec["layers"]):
        kind = layer["type"]
        weight = tensors.get(f"{i}.weight")
        bias = tensors.get(f"{i}.bias")
        if kind == "dense":
            x = x @ weight.astype(np.float64).T + bias
        elif kind == "conv2d":
            p, k, s = layer["padding"], layer["kernel"], layer["stride"]
            xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
            w = windows(xp, k, s)  # [N, C, OH, OW, k, k]
            weight = weight.astype(np.float64)
            if layer.get("weight_standardization", False):
                rows = weight.reshape(weight.shape[0], -1)
                mean = rows.mean(axis=1, keepdims=True)
                var = rows.var(axis=1, keepdims=True)
                weight = ((rows - mean) / np.sqrt(var + 1e-5)).reshape(weight.shape)
            x = np.einsum("nchwij,ocij->nohw", w, weight)
            x += bias[None, :, None, None]
        elif kind == "max_pool":
            x = windows(x, layer["kernel"], layer["stride"]).max(axis=(4, 5))
        elif kind == "avg_pool":
            x = windows(x, layer["kernel"], layer["stride"]).mean(axis=(4, 5))
        elif kind == "flatten":
            x = x.reshape(x.shape[0], -1)
        elif kind == "group_norm":
            g = layer["groups"]
            n, c = x.shape[0], x.shape[1]
            grouped = x.reshape(n, g, -1)
            mean = grouped.mean(axis=2, keepdims=True)
            var = grouped.var(axis=2, keepdims=True)
            xhat = ((grouped - mean) / np.sqrt(var + 1e-5)).reshape(x.shape)
            extra = (1,) * (x.ndim - 2)
            x = xhat * weight.reshape((1, c) + extra) + bias.reshape((1, c) + extra)
        elif kind == "activation":
            f = layer["function"]
            if f == "relu":
                x = np.maximum(x, 0.0)
            elif f == "tanh":
                x = np.tanh(x)
            elif f == "sigmoid":
                x = 1.0 / (1.0 + np.exp(-x))
            else:
                raise SystemExit(f"unknown activation {f}")
        elif kind == "residual_save":
            skips.append(x)
        elif kind == "residual_add":
            a = skips.pop()
            if x.ndim == 4:
                s = a.shape[2] // x.shape[2]
                a = a[:, :, ::s, ::s]
            pad = [(0, 0), (0, x.shape[1] - a.shape[1])] + [(0, 0)] * (x.ndim - 2)
            x = x + np.pad(a, pad)
        else:
            raise SystemExit(f"unknown layer type {kind}")
    return x


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    model_path, inputs_path, logits_path = sys.argv[1:]
    with safe_open(model_path, "np") as f:
        meta = json.loads(f.metadata()["dpx"])
    spec = meta["model_spec"]
    tensors = load_file(model_path)
    features = int(np.prod(spec["input_shape"]))
    x = np.fromfile(inputs_path, dtype="<f4").reshape(-1, features)
    want = np.fromfile(logits_path, dtype="<f4").reshape(x.shape[0], -1).astype(np.float64)
    got = forward(spec, tensors, x)
    err = np.abs(got - want) / np.maximum(1.0, np.abs(want))
    print(f"{x.shape[0]} examples, {want.shape[1]} logits each, largest relative difference {err.max():.3g}")
    if not err.max() <= TOLERANCE:
        print(f"FAIL: above {TOLERANCE}")
        sys.exit(1)


if __name__ == "__main__":
    main()
