"""User-facing errors of the validators (the CLI prints them as one line)."""

from __future__ import annotations

from mashbill.errors import MashbillError


class ValidationInputError(MashbillError):
    """An input file, tokenizer or chat template that validation cannot use.

    The message names the file (and row, where there is one) and says what was expected.
    """


class TokenizerLoadError(ValidationInputError):
    """A tokenizer that cannot be loaded offline."""


class SpanAuditError(MashbillError):
    """The fast span method disagreed with a full render+tokenize: the run's span figures are not trusted."""
