"""The screens a synthesized query passes before it joins the pool.

- ``pool_merge``: After `mashbill merge` of sharded synthesis runs: drop the queries that duplicate one another ...
- ``queries``: The screen a synthesized query passes before it joins the pool (`factory.generate.synth`).
- ``query_fluency``: SYN013: is a synthesized query fluent text?
- ``query_quality``: Is a synthesized query a genuine request of its cell?
"""
