"""The roles a writer commits as. The rules of each live in the commit script
(``scripts.COMMIT``), which refuses what the role may not do; docs/security.md explains them.

A role is bound to credentials, not claimed: committing as role R needs the caller's Redis
user to hold write access to ``Keys.role_key(R)`` (each role's ACL user holds its own; the
administrator holds all), and a node agent's node N needs ``Keys.node_key(N)``, or a
node-admission caller vouching for N.
"""

from __future__ import annotations

ADMIN = "admin"  # the CLI (an operator) and, for its users, the API server: every write
RECONCILER = "reconciler"  # pods, controller revisions, events, decisions, DaemonSet status
STATUS_WRITER = "status-writer"  # DaemonSet .status only
GC = "gc"  # deletions of dependents, taint evictions, finishing deletions (finalizers, ...)
NODE_AGENT = "node-agent"  # its own Nodes, status and binding of pods on them, their removal
WATCHER = "watcher"  # commits nothing (its writes are the workqueue's and expectations')
NODE_ADMISSION = "node-admission"  # commits node agents' requests, vouching for their nodes

COMMITTING = (ADMIN, RECONCILER, STATUS_WRITER, GC, NODE_AGENT)
