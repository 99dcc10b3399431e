"""Packing from NumPy arrays and from a PyTorch map-style Dataset.

Every sample is converted to NumPy the same way (`as_numpy`) and checked against sample 0,
which fixes each field's dtype and shape: a dataset whose samples disagree would be packed
into garbage, so the first disagreement is refused, naming the sample and the field.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from .format import DTYPES, FieldSpec, PackError, SampleError, check_name
from .writer import DatasetWriter

# NumPy dtype (kind + itemsize, any byte order) -> format dtype name.
_NUMPY_TO_NAME = {"u1": "uint8", "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64",
                  "f2": "float16", "f4": "float32"}
_FIXES = {"f8": "cast it to float32", "b1": "cast it to uint8", "u2": "cast it to int32",
          "u4": "cast it to int64", "u8": "cast it to int64"}

DEFAULT_PAIR_NAMES = ("input", "label")
BLOCK_BYTES = 64 << 20  # rows per write when packing whole arrays: bounded memory, few calls

ProgressFn = Optional[Callable[[int, int], None]]  # (samples done, total)


def as_numpy(value: Any, field: Optional[str], index: int) -> tuple[str, np.ndarray]:
    """Converts one value to (format dtype name, NumPy array) without copying where it can.

    Python ints become int64 and floats float32 (what a label and a scalar feature want; a
    NumPy float64 scalar is a Python float, so it too), while float64 arrays are refused
    rather than silently halved; torch tensors keep their dtype, torch.bfloat16 becoming its
    raw bits as uint16.
    """
    torch = sys.modules.get("torch")  # only a dataset that made tensors has imported torch
    if torch is not None and isinstance(value, torch.Tensor):
        tensor = value.detach().cpu()
        if tensor.dtype == torch.bfloat16:
            bits = tensor.contiguous().view(torch.int16).numpy().view("<u2")
            return "bfloat16", bits
        try:
            array = tensor.numpy()
        except TypeError:
            raise SampleError(index, field, f"torch dtype {tensor.dtype} cannot be packed; "
                              f"convert it to one of {', '.join(DTYPES)}") from None
    elif isinstance(value, (bool, np.bool_)):
        raise SampleError(index, field, "a bool cannot be packed; use an int (0/1) or uint8")
    elif isinstance(value, int):
        try:
            array = np.asarray(value, dtype=np.int64)
        except OverflowError:
            raise SampleError(index, field, f"{value} does not fit int64") from None
    elif isinstance(value, float):
        array = np.asarray(value, dtype=np.float32)
    elif type(value).__module__.startswith("PIL."):
        raise SampleError(index, field, "a PIL image cannot be packed as is; return a tensor, "
                          "e.g. with torchvision.transforms.PILToTensor() ([3, H, W] uint8)")
    else:
        array = np.asarray(value)
    key = f"{array.dtype.kind}{array.dtype.itemsize}"
    if key not in _NUMPY_TO_NAME:
        fix = _FIXES.get(key, f"convert it to one of {', '.join(DTYPES)}")
        raise SampleError(index, field, f"dtype {array.dtype} is not one the format holds; {fix}")
    return _NUMPY_TO_NAME[key], array


def _named_values(sample: Any, index: int,
                  field_names: Optional[Sequence[str]]) -> list[tuple[str, Any]]:
    """Splits a sample into (field name, value) pairs: dicts by key, tuples by position."""
    if isinstance(sample, Mapping):
        if field_names is None:
            return list(sample.items())
        missing = [n for n in field_names if n not in sample]
        if missing:
            raise SampleError(index, missing[0], f"missing from the sample (its keys are "
                              f"{sorted(map(str, sample))}); every sample needs every field")
        return [(n, sample[n]) for n in field_names]
    if isinstance(sample, (tuple, list)):
        names = field_names
        if names is None:
            if len(sample) != 2:
                raise SampleError(index, None, f"a {len(sample)}-tuple: name its fields with "
                                  "field_names (--fields a,b,...)")
            names = DEFAULT_PAIR_NAMES
        if len(names) != len(sample):
            raise SampleError(index, None, f"a {len(sample)}-tuple, but {len(names)} field "
                              f"names were given ({','.join(names)})")
        return list(zip(names, sample))
    names = field_names or ("input",)
    if len(names) != 1:
        raise SampleError(index, None, f"a single value, but {len(names)} field names were "
                          "given")
    return [(names[0], sample)]


def convert_sample(sample: Any, index: int,
                   field_names: Optional[Sequence[str]]) -> dict[str, tuple[str, np.ndarray]]:
    """One sample as {field name: (dtype name, array)}, in field order."""
    out: dict[str, tuple[str, np.ndarray]] = {}
    for name, value in _named_values(sample, index, field_names):
        if not isinstance(name, str):
            raise SampleError(index, None, f"key {name!r} is not a string; fields are named by "
                              "strings")
        try:
            check_name(name)
        except PackError as e:
            raise SampleError(index, None, str(e)) from None
        out[name] = as_numpy(value, name, index)
    return out


def specs_from(first: Mapping[str, tuple[str, np.ndarray]],
               classes: Optional[Mapping[str, int]]) -> list[FieldSpec]:
    """The fields sample 0 sets, with `classes` attached to the label fields it names."""
    classes = dict(classes or {})
    unknown = [n for n in classes if n not in first]
    if unknown:
        raise PackError(f"classes names field '{unknown[0]}', but the fields are "
                        f"{', '.join(first)}")
    return [FieldSpec(name, dtype, tuple(array.shape), classes=classes.get(name))
            for name, (dtype, array) in first.items()]


def check_like(sample: Mapping[str, tuple[str, np.ndarray]], specs: Sequence[FieldSpec],
               index: int) -> None:
    """Refuses a sample whose fields differ from sample 0's in names, dtypes or shapes."""
    names = [s.name for s in specs]
    for spec in specs:
        if spec.name not in sample:
            raise SampleError(index, spec.name, f"missing, but sample 0 has it (fields: "
                              f"{', '.join(names)}); every sample needs every field")
        dtype, array = sample[spec.name]
        if dtype != spec.dtype:
            raise SampleError(index, spec.name, f"dtype {dtype}, but sample 0's is {spec.dtype}; "
                              "every sample of a field needs the same dtype")
        if tuple(array.shape) != spec.shape:
            raise SampleError(index, spec.name, f"shape {list(array.shape)}, but sample 0's is "
                              f"{list(spec.shape)}; resize or pad so all samples agree")
    for name in sample:
        if name not in names:
            raise SampleError(index, name, f"not a field of sample 0 (fields: "
                              f"{', '.join(names)}); every sample needs the same fields")


def write_dataset(out_dir: str | Path, dataset: Any,
                  field_names: Optional[Sequence[str]] = None,
                  classes: Optional[Mapping[str, int]] = None,
                  shard_size: Optional[int] = None, *,
                  meta: Optional[dict[str, Any]] = None, force: bool = False,
                  progress: ProgressFn = None) -> list[FieldSpec]:
    """Packs a map-style dataset (`len()` and `dataset[i]`, e.g. a torch.utils.data.Dataset).

    Samples may be tensors, tuples (named by `field_names`, default input,label for pairs) or
    dicts (their keys; `field_names` then picks and orders them). Returns the fields written.
    """
    try:
        samples = len(dataset)
    except TypeError:
        raise PackError("the dataset has no len(): fulcrum-pack needs a map-style Dataset "
                        "(__len__ and __getitem__), not an IterableDataset") from None
    if samples < 1:
        raise PackError("the dataset is empty; the format needs at least one sample")
    names = list(field_names) if field_names is not None else None
    first = convert_sample(dataset[0], 0, names)
    specs = specs_from(first, classes)
    writer = DatasetWriter(Path(out_dir), specs, samples, shard_size=shard_size, meta=meta,
                           force=force, progress=progress)
    for index in range(samples):
        sample = first if index == 0 else convert_sample(dataset[index], index, names)
        check_like(sample, specs, index)
        # asarray, not ascontiguousarray, which would turn a scalar label into shape [1].
        writer.write({spec.name: np.asarray(sample[spec.name][1], dtype=spec.descr,
                                            order="C")[None]
                      for spec in specs})
    writer.finish()
    return specs


def write_arrays(out_dir: str | Path, arrays: Mapping[str, Any],
                 classes: Optional[Mapping[str, int]] = None,
                 meta: Optional[dict[str, Any]] = None, *, shard_size: Optional[int] = None,
                 force: bool = False, progress: ProgressFn = None) -> list[FieldSpec]:
    """Packs whole arrays (NumPy arrays, memmaps or torch tensors), one field per name; the
    first axis is the sample. Copies in blocks, so memory-mapped inputs need not fit in RAM.
    """
    if not arrays:
        raise PackError("no arrays given; pass at least one name=array")
    converted = {}
    for name, value in arrays.items():
        check_name(name)
        try:
            dtype, array = as_numpy(value, name, 0)
        except SampleError as e:
            raise PackError(f"field '{name}': {e.problem}") from None
        if array.ndim == 0:
            raise PackError(f"field '{name}': a scalar, but the first axis must be the sample; "
                            "pass an array of shape [samples, ...]")
        converted[name] = (dtype, array)
    lengths = {name: len(array) for name, (_, array) in converted.items()}
    samples = next(iter(lengths.values()))
    if any(n != samples for n in lengths.values()):
        raise PackError(f"the arrays disagree on the number of samples (first axis): {lengths}")
    specs = specs_from({n: (d, a[0]) for n, (d, a) in converted.items()}, classes)
    writer = DatasetWriter(Path(out_dir), specs, samples, shard_size=shard_size, meta=meta,
                           force=force, progress=progress)
    row_bytes = sum(a[0].nbytes for _, a in converted.values())
    block = max(1, BLOCK_BYTES // max(row_bytes, 1))
    for start in range(0, samples, block):
        writer.write({spec.name: np.asarray(converted[spec.name][1][start:start + block],
                                            dtype=spec.descr, order="C")
                      for spec in specs})
    writer.finish()
    return specs
