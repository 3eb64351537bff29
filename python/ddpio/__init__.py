"""ddpio: distributed data loading for PyTorch training.

    import ddpio
    sampler = ddpio.DistributedSampler(dataset, shuffle=True, seed=0)   # torch's, index for index
    data = ddpio.Dataset("/data/train.lmdb")                            # (jpeg_bytes, label)
    loader = ddpio.Loader("/data/train.lmdb", batch_size=256)           # batches as torch tensors
    ddpio.convert("/data/imagenet/train", "/data/train.lmdb")           # what `ddpio convert` does

Importing ddpio does not import torch. The command-line tools are `python3 -m ddpio ...`. The C++
core logs through Python's logging (logger "ddpio"; DDPIO_LOG_LEVEL chooses what it produces).
"""
from ddpio._ddpio import __version__
from ddpio._ddpio import ConvertProgress, convert  # an image folder (or other source) into a dataset
from ddpio import _logging  # the core's log lines go to logging.getLogger("ddpio")
from ddpio.dataset import Dataset
from ddpio.errors import (AbortedError, AlreadyExistsError, CancelledError, DataLossError,
                          DeadlineExceededError, Error, FailedPreconditionError, InternalError,
                          InvalidArgumentError, NotFoundError, OutOfRangeError, PermissionDeniedError,
                          ResourceExhaustedError, UnauthenticatedError, UnavailableError, UnimplementedError,
                          UnknownError)
from ddpio.loader import Loader
from ddpio.sampler import DistributedSampler

__all__ = [
    "__version__", "convert", "ConvertProgress", "Dataset", "DistributedSampler", "Loader", "Error",
    "AbortedError", "AlreadyExistsError",
    "CancelledError", "DataLossError", "DeadlineExceededError", "FailedPreconditionError",
    "InternalError", "InvalidArgumentError", "NotFoundError", "OutOfRangeError",
    "PermissionDeniedError", "ResourceExhaustedError", "UnauthenticatedError", "UnavailableError",
    "UnimplementedError",
    "UnknownError",
]
