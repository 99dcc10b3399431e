"""Packing an image folder in torchvision's ImageFolder layout: SRC/<class>/**/<image>.

Classes are the subdirectories of SRC, sorted, so label k means the same class as
`torchvision.datasets.ImageFolder(SRC)` gives it. Each image is decoded with Pillow, converted
to RGB, resized so its shorter side is `image_size` and center-cropped to a square (what
`Resize(size)` then `CenterCrop(size)` do), and stored uint8 [3, H, W], channels first.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional

import numpy as np

from .format import FieldSpec, PackError, SampleError
from .sources import ProgressFn
from .writer import DatasetWriter

# torchvision.datasets.folder.IMG_EXTENSIONS
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
CHUNK = 256  # images decoded ahead of the writer: keeps memory bounded and threads busy


def find_images(src: Path) -> tuple[list[str], list[tuple[Path, int]]]:
    """The sorted class names and every (image path, label), in ImageFolder's order."""
    src = Path(src)
    if not src.is_dir():
        raise PackError(f"{src} is not a directory")
    classes = sorted(e.name for e in os.scandir(src) if e.is_dir())
    if not classes:
        raise PackError(f"{src} has no class subdirectories; the layout is SRC/<class>/<image>")
    items: list[tuple[Path, int]] = []
    for label, name in enumerate(classes):
        found = 0
        for root, _, files in sorted(os.walk(src / name, followlinks=True)):
            for file in sorted(files):
                if file.lower().endswith(IMG_EXTENSIONS):
                    items.append((Path(root) / file, label))
                    found += 1
        if not found:
            raise PackError(f"class '{name}' ({src / name}) holds no images "
                            f"({' '.join(IMG_EXTENSIONS)}); add some or remove the directory")
    return classes, items


def _resample_bilinear(image_module: Any) -> Any:
    return getattr(getattr(image_module, "Resampling", image_module), "BILINEAR")


def load_image(path: Path, size: int, index: int = 0) -> np.ndarray:
    """One image as uint8 [3, size, size]: RGB, shorter side resized to size, center crop."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            img = img.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        raise SampleError(index, "image", f"{path} cannot be decoded ({e}); remove or replace "
                          "it") from None
    width, height = img.size
    if width <= height:
        new_w, new_h = size, int(size * height / width)
    else:
        new_w, new_h = int(size * width / height), size
    img = img.resize((new_w, new_h), _resample_bilinear(Image))
    left = int(round((new_w - size) / 2.0))
    top = int(round((new_h - size) / 2.0))
    img = img.crop((left, top, left + size, top + size))
    return np.asarray(img, dtype=np.uint8).transpose(2, 0, 1)


def pack_image_folder(src: str | Path, out_dir: str | Path, image_size: int,
                      shard_size: Optional[int] = None, *, force: bool = False,
                      progress: ProgressFn = None,
                      workers: Optional[int] = None) -> list[FieldSpec]:
    """Packs SRC into fields image (uint8 [3, S, S]) and label (int64, classes set), with the
    class names in meta. Decodes on `workers` threads (Pillow releases the GIL while it
    decodes and resizes); the order of samples does not depend on them."""
    try:
        import PIL  # noqa: F401
    except ImportError:
        raise PackError("packing images needs Pillow: apt-get install python3-pil, or "
                        "pip install 'fulcrum[images]'") from None
    if image_size < 1:
        raise PackError(f"--image-size must be at least 1, not {image_size}")
    src = Path(src)
    classes, items = find_images(src)
    specs = [FieldSpec("image", "uint8", (3, image_size, image_size)),
             FieldSpec("label", "int64", (), classes=len(classes))]
    meta = {"source": f"ImageFolder {src.resolve()}", "class_names": classes,
            "image_size": image_size}
    writer = DatasetWriter(Path(out_dir), specs, len(items), shard_size=shard_size, meta=meta,
                           force=force, progress=progress)
    with ThreadPoolExecutor(workers or min(8, os.cpu_count() or 1)) as pool:
        for start in range(0, len(items), CHUNK):
            chunk = items[start:start + CHUNK]
            images = list(pool.map(lambda i: load_image(chunk[i][0], image_size, start + i),
                                   range(len(chunk))))
            writer.write({"image": np.stack(images),
                          "label": np.array([label for _, label in chunk], dtype="<i8")})
    writer.finish()
    return specs
