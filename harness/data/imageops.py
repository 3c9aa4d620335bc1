"""Image transforms on numpy batches and Pillow images, shared by the image readers.

Resizing a batch is two small matrix products (rows, then columns) with the
half-pixel-centre convention of Pillow, OpenCV and torch's
``interpolate(align_corners=False)``: the same images come out whichever
framework trains on them, and no framework is needed to make them.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# Per-channel statistics of the 50,000 CIFAR-10 training images (pixels / 255).
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)
EVAL_CROP = 0.875  # resize to size/0.875 then centre-crop: 256 -> 224 for ImageNet


@lru_cache(maxsize=16)
def _weights(src: int, dst: int) -> np.ndarray:
    """(dst, src) bilinear interpolation matrix, half-pixel centres, edges clamped."""
    m = np.zeros((dst, src), np.float32)
    pos = (np.arange(dst) + 0.5) * src / dst - 0.5
    pos = np.clip(pos, 0, src - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, src - 1)
    frac = (pos - lo).astype(np.float32)
    m[np.arange(dst), lo] += 1 - frac
    m[np.arange(dst), hi] += frac
    return m


def resize(images: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear resize of an (N, C, H, W) float batch; a no-op at the same size."""
    h, w = images.shape[2:]
    if (h, w) == (height, width):
        return images
    rows, cols = _weights(h, height), _weights(w, width)
    return np.einsum("yh,nchw,xw->ncyx", rows, images.astype(np.float32), cols, optimize=True)


def normalize(images: np.ndarray, mean, std) -> np.ndarray:
    """(x - mean) / std per channel, on an (N, C, H, W) batch."""
    m = np.asarray(mean, np.float32).reshape(1, -1, 1, 1)
    s = np.asarray(std, np.float32).reshape(1, -1, 1, 1)
    return (images - m) / s


def random_flip(images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Mirror each image left-right with probability 1/2."""
    flip = rng.random(len(images)) < 0.5
    out = images.copy()
    out[flip] = out[flip, :, :, ::-1]
    return out


def random_pad_crop(images: np.ndarray, pad: int, rng: np.random.Generator) -> np.ndarray:
    """Zero-pad by ``pad`` and cut a random window of the original size (CIFAR's usual)."""
    n, c, h, w = images.shape
    padded = np.pad(images, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    dy = rng.integers(0, 2 * pad + 1, n)
    dx = rng.integers(0, 2 * pad + 1, n)
    return np.stack([padded[i, :, dy[i] : dy[i] + h, dx[i] : dx[i] + w] for i in range(n)])


def random_resized_crop_box(
    width: int, height: int, rng: np.random.Generator, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)
) -> tuple[int, int, int, int]:
    """The crop box of Inception/ResNet training (torchvision's RandomResizedCrop rule):
    an area share in ``scale`` and a log-uniform aspect ratio in ``ratio``, ten tries,
    then the whole image clipped to the ratio range, centred."""
    area = width * height
    for _ in range(10):
        target = area * rng.uniform(*scale)
        aspect = np.exp(rng.uniform(np.log(ratio[0]), np.log(ratio[1])))
        w = int(round(np.sqrt(target * aspect)))
        h = int(round(np.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            x = int(rng.integers(0, width - w + 1))
            y = int(rng.integers(0, height - h + 1))
            return x, y, x + w, y + h
    in_ratio = width / height
    if in_ratio < ratio[0]:
        w, h = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        w, h = int(round(height * ratio[1])), height
    else:
        w, h = width, height
    x, y = (width - w) // 2, (height - h) // 2
    return x, y, x + w, y + h


def center_crop_box(width: int, height: int, out_h: int, out_w: int) -> tuple[float, ...]:
    """The box that a resize of the shorter side to size/0.875 and a centre crop take."""
    scale = min(width, height) / (min(out_h, out_w) / EVAL_CROP)
    w, h = out_w * scale, out_h * scale
    x, y = (width - w) / 2, (height - h) / 2
    return x, y, x + w, y + h
