"""The errors every store user sees, defined in ``shared.model.errors`` (pure: the log's own
module raises them too) and named here for the store's callers."""

from shared.model.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    CorruptEntryError,
    ForbiddenError,
    InvalidError,
    MalformedObjectError,
    NotFoundError,
    StoreError,
    TooLargeError,
    UnavailableError,
)

__all__ = ["AlreadyExistsError", "BadRequestError", "ConflictError", "CorruptEntryError",
           "ForbiddenError", "InvalidError", "MalformedObjectError", "NotFoundError",
           "StoreError", "TooLargeError", "UnavailableError"]
