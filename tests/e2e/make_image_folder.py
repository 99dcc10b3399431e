"""Writes a small image folder in torchvision's ImageFolder layout with learnable classes:
each class is a colour, each image that colour with noise, of varied sizes and formats.

usage: make_image_folder.py OUT [IMAGES_PER_CLASS]
"""
import pathlib
import sys

import numpy as np
from PIL import Image

COLOURS = {"red": (200, 40, 40), "green": (40, 200, 40), "blue": (40, 40, 200)}


def main(out, per_class):
    rng = np.random.default_rng(7)
    for name, colour in COLOURS.items():
        directory = pathlib.Path(out) / name
        directory.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            height, width = 18 + i % 5, 20 + i % 7
            noise = rng.integers(-40, 40, size=(height, width, 3))
            pixels = np.clip(np.array(colour) + noise, 0, 255).astype(np.uint8)
            suffix = "png" if i % 2 else "jpg"
            Image.fromarray(pixels).save(directory / f"{i:04d}.{suffix}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100)
