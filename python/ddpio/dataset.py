"""ddpio.Dataset: a converted dataset as a map-style dataset, for torch's DataLoader or by hand."""
import array
import operator
import os
import sys

from ddpio import _ddpio


def dataset_location(path):
    """Where a dataset is, as every process of a job finds it: an s3://BUCKET/PREFIX URL as it is
    (a dataset in an object store); a path made absolute, whatever the working directory of a
    worker or an unpickled copy."""
    name = os.fspath(path)
    url = name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else name
    if url.startswith("s3://"):
        return url
    return os.path.abspath(name)


class Dataset:
    """The records of a dataset written by `ddpio convert`.

    len(ds) is the number of records; for a token dataset (ds.is_tokens) ds[i] is document i's
    token ids as an array.array (uint16 'H' or uint32 'I'); otherwise ds[i] is (image_bytes, label)
    of record i (negative i counts from the end): a JPEG file's bytes as converted, or for images stored as pixels (PNG, WebP, ...
    sources) a binary PPM — either opens with PIL.Image.open(io.BytesIO(image_bytes));
    ds.source(i) the file it was converted from; ds.classes the class names (label i is classes[i]); ds.info() what the dataset
    says about itself. Records are checksummed on every read: a damaged one raises
    ddpio.DataLossError naming it. Works in torch DataLoader workers (forked processes reopen the
    dataset). A missing path raises FileNotFoundError.
    """

    def __init__(self, path):
        # Absolute, so that a worker or an unpickled copy finds it whatever its working
        # directory; bytes to the core, so that any Linux path works.
        self._path = dataset_location(path)
        self._core = _ddpio.Dataset(os.fsencode(self._path))

    @property
    def path(self):
        return self._path

    @property
    def classes(self):
        return list(self._core.classes)

    def __len__(self):
        return len(self._core)

    def _index(self, index):
        index = operator.index(index)  # ints, numpy and torch integers; anything else is a TypeError
        size = len(self._core)
        if not -size <= index < size:
            raise IndexError(f"index {index} is outside the dataset's {size} records ({self._path})")
        return index + size if index < 0 else index

    @property
    def is_tokens(self):
        """True for a token dataset (documents of token ids, for language models)."""
        return self._core.token_width != 0

    def __getitem__(self, index):
        data, label_or_width = self._core.get(self._index(index))
        if self._core.token_width == 0:
            return data, label_or_width
        # A document: its ids as an array.array ('H': uint16, 'I': uint32), which numpy and torch
        # take as they are (numpy.asarray, torch.frombuffer).
        ids = array.array("H" if label_or_width == 2 else "I")
        ids.frombytes(data)
        if sys.byteorder != "little":
            ids.byteswap()
        return ids

    def source(self, index):
        """The source file (relative to the converted folder) or key record `index` came from."""
        return self._core.source(self._index(index))

    def info(self):
        return self._core.info()

    def __repr__(self):
        if self.is_tokens:
            return f"ddpio.Dataset({self._path!r}, {len(self)} documents, {self.info()['tokens']} tokens)"
        return f"ddpio.Dataset({self._path!r}, {len(self)} records, {len(self._core.classes)} classes)"

    def __reduce__(self):
        # Pickled (spawned DataLoader workers) as its path: the receiver opens it again.
        return (Dataset, (self._path,))
