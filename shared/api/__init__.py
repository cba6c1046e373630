"""The Kubernetes API's rules as pure functions: what a write stores (``writes``), the errors
(``errors``), the schemas and strict field validation (``schema``), the OpenAPI v3 documents
(``openapi``), patches (``patch``), field and label selection for lists (``selection``) and
the Table printers (``tables``). Pure: no IO beyond
reading an installed package's schema files, no clock of its own; the API server and the CLI
both call it, so each rule exists once."""
