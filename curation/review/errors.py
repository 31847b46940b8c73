"""User-facing errors of human review (the CLI prints them as one line)."""

from __future__ import annotations

from mashbill.errors import MashbillError


class ReviewError(MashbillError):
    """A review server that cannot be reached or used, or a review dataset that is missing or incompatible.

    Messages say which server (URL, never the API key), what was expected and what to do next.
    """


class ServerStartError(ReviewError):
    """The embedded argilla-server could not be built or started; the message points at its log."""
