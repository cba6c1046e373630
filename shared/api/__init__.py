"""The Kubernetes API's rules as pure functions: patches, field and label selection for
lists, and the Table printers. Pure: no IO, no clock of its own; the API server and the CLI
both call it, so each rule exists once."""
