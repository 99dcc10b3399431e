"""An ImageFolder tree packs into image uint8 [3, S, S] and label int64 with classes set:
classes sorted, files in ImageFolder's order, shorter side resized then center-cropped, and
each class keeps its distinct colour (so the packed set is learnable)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from conftest import numpy_read_back
from fulcrum.pack import load, pack_image_folder

# Class -> colour; the directory names are deliberately not in colour order.
COLOURS = {"zebra": (20, 200, 40), "ant": (220, 30, 30), "moth": (30, 40, 210)}
SIZES = [(40, 24), (24, 40), (32, 32), (50, 30)]  # (width, height): wide, tall, square


def make_folder(root, per_class: int = 4):
    """Small PNGs: a class colour with a per-image brightness jitter, in varied shapes; plus
    a nested image, a non-image file (skipped) and greyscale / RGBA images (converted)."""
    rng = np.random.default_rng(7)
    expected = []  # (path, label) in ImageFolder order
    for label, name in enumerate(sorted(COLOURS)):
        directory = root / name
        (directory / "nested").mkdir(parents=True)
        (directory / "notes.txt").write_text("not an image")
        for k in range(per_class):
            w, h = SIZES[k % len(SIZES)]
            colour = np.clip(np.array(COLOURS[name]) + rng.integers(-15, 16), 0, 255)
            pixels = np.broadcast_to(colour.astype(np.uint8), (h, w, 3))
            path = directory / f"img{k:02d}.png"
            Image.fromarray(np.ascontiguousarray(pixels)).save(path)
            expected.append((path, label))
        rgba = directory / "nested" / "z.png"
        Image.new("RGBA", (30, 30), COLOURS[name] + (255,)).save(rgba)
        expected.append((rgba, label))
    grey = root / "ant" / "grey.PNG"
    Image.new("L", (24, 24), 128).save(grey)
    expected.insert(0, (grey, 0))  # "grey.PNG" sorts before "img00.png"
    return expected


def reference(path, size: int) -> np.ndarray:
    """torchvision's Resize(size) + CenterCrop(size) on a PIL RGB image, written out."""
    img = Image.open(path).convert("RGB")
    w, h = img.size
    nw, nh = (size, int(size * h / w)) if w <= h else (int(size * w / h), size)
    img = img.resize((nw, nh), Image.BILINEAR)
    left, top = int(round((nw - size) / 2)), int(round((nh - size) / 2))
    return np.asarray(img.crop((left, top, left + size, top + size))).transpose(2, 0, 1)


def test_image_folder_reads_back_identical_and_learnable(tmp_path):
    expected = make_folder(tmp_path / "src")
    pack_image_folder(tmp_path / "src", tmp_path / "out", 16)
    images = np.stack([reference(p, 16) for p, _ in expected])
    labels = np.array([label for _, label in expected], dtype=np.int64)
    for read in (numpy_read_back(tmp_path / "out"), load(tmp_path / "out")):
        assert read["image"].dtype == np.uint8
        assert read["image"].shape == (len(expected), 3, 16, 16)
        np.testing.assert_array_equal(read["image"], images)
        np.testing.assert_array_equal(read["label"], labels)

    header = json.loads((tmp_path / "out" / "dataset.json").read_text())
    assert header["fields"][1]["classes"] == 3
    assert header["meta"]["class_names"] == ["ant", "moth", "zebra"]
    assert header["meta"]["source"].startswith("ImageFolder ")
    # Learnable: every colour image is nearest its own class colour.
    palette = np.array([COLOURS[n] for n in ["ant", "moth", "zebra"]], dtype=float)
    for (path, label), image in zip(expected, images):
        if path.name == "grey.PNG":
            continue
        mean = image.reshape(3, -1).mean(axis=1)
        assert np.argmin(((palette - mean) ** 2).sum(axis=1)) == label, path


@pytest.mark.parametrize("width,height", [(96, 32), (32, 96)])
def test_shorter_side_is_resized_then_the_centre_is_cropped(tmp_path, width, height):
    # Thirds along the long side: red | green | blue. Resized to a shorter side of 16 the long
    # side is 48, and the centre crop is the green third (its edges blend with bilinear).
    pixels = np.zeros((height, width, 3), dtype=np.uint8)
    third = max(width, height) // 3
    for k, channel in enumerate((0, 1, 2)):
        if width > height:
            pixels[:, k * third:(k + 1) * third, channel] = 255
        else:
            pixels[k * third:(k + 1) * third, :, channel] = 255
    (tmp_path / "src" / "only").mkdir(parents=True)
    Image.fromarray(pixels).save(tmp_path / "src" / "only" / "a.png")
    pack_image_folder(tmp_path / "src", tmp_path / "out", 16)
    image = load(tmp_path / "out")["image"][0]
    inner = image[:, 2:14, 2:14]
    assert (inner[1] == 255).all() and (inner[0] == 0).all() and (inner[2] == 0).all()


def test_image_folder_refuses_an_undecodable_image(tmp_path):
    (tmp_path / "src" / "a").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(tmp_path / "src" / "a" / "0.png")
    (tmp_path / "src" / "a" / "1.png").write_bytes(b"not a png")
    from fulcrum.pack import SampleError
    with pytest.raises(SampleError, match=r"sample 1, field 'image': .*1\.png cannot be decoded"):
        pack_image_folder(tmp_path / "src", tmp_path / "out", 8)
    assert not (tmp_path / "out" / "dataset.json").exists()
