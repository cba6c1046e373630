"""Every tunable length of daemonbus in one place: lease lengths, timeouts, page sizes.

Each has its default here and may be overridden by the environment variable
``DAEMONBUS_<NAME>`` (``DAEMONBUS_WORKER_LEASE_SECONDS=12``), read once when a process
starts (``current``). A value that is not a positive number is refused at start, naming the
variable, rather than running with a broken setting.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass

PREFIX = "DAEMONBUS_"


@dataclass(frozen=True)
class Settings:
    # leases
    leader_lease_seconds: float = 8.0  # the watcher's leader lease (a stand-by takes over)
    worker_lease_seconds: float = 8.0  # a worker's hold on a key: handed out again within it
    worker_renew_seconds: float = 2.0  # how often a worker renews that hold mid-sync
    # timeouts
    stall_seconds: float = 120.0  # a process loop silent this long is hung (it restarts)
    expectations_timeout_seconds: float = 300.0  # client-go's ExpectationsTimeout
    list_catch_up_seconds: float = 3.0  # an API list waits this long for the watch cache
    # kube-controller-manager's --min-resync-period (12 h): the watcher queues every
    # DaemonSet for a full sync once a period, the period drawn at its start between this
    # and twice this, as upstream's informers resync
    min_resync_seconds: float = 43_200.0
    # page and batch sizes
    log_page: int = 5000  # entries read per page by export and compaction
    scan_page: int = 2000  # entries read per page by a backwards scan (why)
    rebuild_batch: int = 2000  # entries sent to Redis at once by replay FILE
    status_stream_maxlen: int = 100_000  # status messages kept (approximately)
    watch_window: int = 20_000  # recent events the API server's watch cache keeps
    # pacing
    status_write_gap_seconds: float = 0.1  # the status-writer's pause after a round that wrote
    gc_read_gap_seconds: float = 0.1  # the garbage collector's pause after a read of entries

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """The defaults, with each ``DAEMONBUS_<NAME>`` in ``environ`` taking its field's
        place; raises ValueError naming a variable whose value is not a positive number.
        Decides."""
        values: dict[str, float | int] = {}
        for f in dataclasses.fields(cls):
            name = PREFIX + f.name.upper()
            raw = environ.get(name)
            if raw is None or raw == "":
                continue
            kind = int if f.type in (int, "int") else float
            try:
                value = kind(raw)
            except ValueError:
                value = 0
            if not value > 0:
                raise ValueError(f"{name}={raw!r}: must be a positive "
                                 f"{'integer' if kind is int else 'number'}")
            values[f.name] = value
        return cls(**values)  # type: ignore[arg-type]


#: this process' settings
current = Settings.from_env(os.environ)
