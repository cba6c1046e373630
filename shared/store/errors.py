"""The errors every store user sees, defined in ``shared.model.errors`` (pure: the log's own
module raises them too) and named here for the store's callers; and the transport's own
(redis-py's), named here so that a caller that rides out an outage or reports a failed call
catches them without importing ``redis`` itself."""

import redis

from shared.model.errors import (
    AdmissionError,
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    CorruptEntryError,
    ForbiddenError,
    InvalidError,
    MalformedObjectError,
    NamespaceTerminatingError,
    NotFoundError,
    StoreError,
    TakenError,
    TooLargeError,
    UnavailableError,
    UndeletableError,
)

# redis-py's errors: any failed call (``TransportError``), and those of a Redis that is away
# (``TransportDown``: a refused or reset connection, a server still loading, a timeout)
TransportError = redis.RedisError
TransportDown: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)

__all__ = [
    "AdmissionError",
    "AlreadyExistsError",
    "BadRequestError",
    "ConflictError",
    "CorruptEntryError",
    "ForbiddenError",
    "InvalidError",
    "MalformedObjectError",
    "NamespaceTerminatingError",
    "NotFoundError",
    "StoreError",
    "TakenError",
    "TooLargeError",
    "TransportDown",
    "TransportError",
    "UnavailableError",
    "UndeletableError",
]
