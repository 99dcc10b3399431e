"""fulcrum.pack: write and read Fulcrum's packed dataset format (docs/dataset-format.md).

A packed dataset is a directory with dataset.json and one .npy file per field (first axis =
sample), which fulcrum-trainer memory-maps and any NumPy user can read. Writers:
`write_dataset` (a torch-style map Dataset), `write_arrays` (NumPy arrays) and
`pack_image_folder` (torchvision's ImageFolder layout). Readers: `load` and `inspect`.
"""

from .format import (DTYPES, FieldSpec, FormatError, PackError, SampleError,
                     bfloat16_to_float32, read_layout)
from .images import pack_image_folder
from .inspect import inspect
from .reader import ShardedArray, load
from .sources import write_arrays, write_dataset

__all__ = [
    "DTYPES", "FieldSpec", "FormatError", "PackError", "SampleError", "ShardedArray",
    "bfloat16_to_float32", "inspect", "load", "pack_image_folder", "read_layout",
    "write_arrays", "write_dataset",
]
