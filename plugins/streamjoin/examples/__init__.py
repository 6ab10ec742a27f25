"""Small example functions that pipeline specs and the conformance scenarios refer to by dotted path."""
