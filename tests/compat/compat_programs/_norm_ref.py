"""float64 references of a normalization over `axes` (forward and backward)."""

import numpy as np


def forward(x, axes, scale, bias, eps):
    mu = x.mean(axis=axes, keepdims=True)
    ri = 1.0 / np.sqrt(((x - mu) ** 2).mean(axis=axes, keepdims=True) + eps)
    return (x - mu) * ri * scale + bias, mu, ri


def backward(dy, x, axes, scale, mu, ri):
    """dx, dscale, dbias; dscale/dbias summed to scale's shape."""
    xhat = (x - mu) * ri
    g = dy * scale
    dx = ri * (g - g.mean(axis=axes, keepdims=True)
               - xhat * (g * xhat).mean(axis=axes, keepdims=True))
    keep = tuple(i for i, (a, b) in enumerate(zip(x.shape, scale.shape)) if b == 1 and a != 1)
    return dx, (dy * xhat).sum(axis=keep, keepdims=True), dy.sum(axis=keep, keepdims=True)
