"""ddpio's exceptions: one per error code of the C++ core, each also the built-in exception a
Python user would catch for it (a missing dataset is a FileNotFoundError, a bad argument a
ValueError, a timeout a TimeoutError). All are ddpio.Error, and carry the core's message."""


class Error(RuntimeError):
    """Any error raised by ddpio's core."""


class CancelledError(Error):
    pass


class UnknownError(Error):
    pass


class InvalidArgumentError(Error, ValueError):
    pass


class DeadlineExceededError(Error, TimeoutError):
    pass


class NotFoundError(Error, FileNotFoundError):
    pass


class AlreadyExistsError(Error, FileExistsError):
    pass


class PermissionDeniedError(Error, PermissionError):
    pass


class ResourceExhaustedError(Error):
    """Out of a resource: memory, disk space, reader slots, connections."""


class FailedPreconditionError(Error):
    pass


class AbortedError(Error):
    pass


class OutOfRangeError(Error, IndexError):
    pass


class UnimplementedError(Error, NotImplementedError):
    pass


class InternalError(Error):
    pass


class UnavailableError(Error, ConnectionError):
    pass


class UnauthenticatedError(Error, PermissionError):
    pass


class DataLossError(Error):
    """The data is damaged: a record failed its checksum, a file is truncated, a peer sent
    something that is not what it promised. The message names the record or file."""


# absl::StatusCode values.
_BY_CODE = {
    1: CancelledError, 2: UnknownError, 3: InvalidArgumentError, 4: DeadlineExceededError,
    5: NotFoundError, 6: AlreadyExistsError, 7: PermissionDeniedError, 8: ResourceExhaustedError,
    9: FailedPreconditionError, 10: AbortedError, 11: OutOfRangeError, 12: UnimplementedError,
    13: InternalError, 14: UnavailableError, 15: DataLossError, 16: UnauthenticatedError,
}


def error_for_code(code):
    """The exception class for an absl::StatusCode (used by the C++ core)."""
    return _BY_CODE.get(code, UnknownError)
