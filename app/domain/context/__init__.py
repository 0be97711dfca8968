"""Context management around the pure compression package.

Profiles (window and compression overrides), the summarizer call, the
compress-and-save pipeline, the demotion hooks and the HTTP triggers an agent
runtime calls (prepare / usage report / compact). Import the submodules
directly; this package deliberately imports nothing at load time so the
sessions domain can use :mod:`app.domain.kernel.layout` without cycles.
"""
