"""The language server front end (pygls)."""
