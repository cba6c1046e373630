"""Export, replay, verification and explanation of the event log.

* ``logfile`` — the versioned export file format (msgpack header, then one record a line).
* ``export``  — log (and its snapshot) → file, streamed in pages.
* ``rebuild`` — file → an empty Redis or key prefix, with the original entry ids.
* ``verify``  — re-run every recorded decision against the state it read; first divergence.
* ``why``     — which decision created or deleted a pod, or why a node has none.
* ``tail``    — entries as readable lines.
* ``compact`` — retention: snapshot plus ``XTRIM MINID``.
* ``bounds``  — parsing ``ID|TIME`` arguments and durations.
"""
