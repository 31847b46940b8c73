"""Human review in Argilla: push records that need eyes, pull reviewers' decisions back into the store.

    local        the embedded argilla-server (own virtual environment, SQLite, SQL search engine)
    client       which server to talk to (ARGILLA_API_URL / ARGILLA_API_KEY or the embedded one) and the
                 adapter around the argilla SDK
    layout       the review dataset: fields, questions, metadata, guidelines, one record
    select       which records go to review (flagged, low-confidence, random:N, all)
    push, pull   the two directions; pull re-validates corrections (corrections) into `review_decisions`

The argilla SDK is imported only by code that has a reachable server (see `client.ArgillaReview.connect`).
"""
