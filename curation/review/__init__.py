"""Human review in Argilla: push records, pull corrections, run a local server. The argilla SDK is imported only by
code that has a reachable server (`client.ArgillaReview.connect`).

- ``client``: Which Argilla server to talk to, and the adapter around the argilla SDK.
- ``corrections``: Re-validate a reviewer's corrected output through the same checks generation and validation use.
- ``errors``: User-facing errors of human review (the CLI prints them as one line).
- ``layout``: What a review dataset looks like: its fields, questions, metadata and guidelines, and one ...
- ``local``: The embedded review server: argilla-server in its own virtual environment, on SQLite, on 127.0.0.1.
- ``pull``: Pull reviewers' responses from Argilla into the store's `review_decisions` table.
- ``push``: Push stored records to Argilla for human review.
- ``select``: Which stored records go to review.
- ``server/``: Files that run inside the argilla-server virtual environment (never imported by mashbill itself).
"""
